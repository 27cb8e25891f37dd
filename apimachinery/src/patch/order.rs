//! Element order after a strategic merge, as upstream `normalizeElementOrder`: elements named by
//! the patch (or by `$setElementOrder`) take the patch's order; elements only the server has keep
//! their relative order and are slotted in before the first patch element that the server held
//! after them. New elements are therefore placed before remaining server-only ones, like upstream.

use serde_json::Value;

use super::identity::Positions;

/// The identity of a list element: its merge key value for maps, the value itself otherwise.
pub(crate) fn ident<'a>(v: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match (v, key) {
        (Value::Object(m), Some(k)) => m.get(k),
        _ => Some(v),
    }
}

/// An element with its positions in the patch order and in the server's list.
struct Placed {
    in_order: Option<usize>,
    on_server: Option<usize>,
    value: Value,
}

pub(crate) fn normalize(
    merged: Vec<Value>,
    order: &[&Value],
    server: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let server_ids: Vec<&Value> = server.iter().filter_map(|v| ident(v, key)).collect();
    let (order_at, server_at) = (Positions::new(order), Positions::new(&server_ids));
    let placed = merged.into_iter().map(|value| {
        let id = ident(&value, key);
        Placed {
            in_order: id.and_then(|id| order_at.of(id)),
            on_server: id.and_then(|id| server_at.of(id)),
            value,
        }
    });
    let (mut ours, mut theirs): (Vec<Placed>, Vec<Placed>) =
        placed.partition(|p| p.in_order.is_some());
    ours.sort_by_key(|p| p.in_order);
    theirs.sort_by_key(|p| p.on_server.unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(ours.len() + theirs.len());
    let mut left = theirs.into_iter().peekable();
    let mut right = ours.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((l.on_server, r.on_server), (Some(a), Some(b)) if a < b),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next.map(|p| p.value));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().filter_map(|v| v["name"].as_str()).collect()
    }

    fn items(names: &[&str]) -> Vec<Value> {
        names.iter().map(|n| json!({"name": n})).collect()
    }

    #[test]
    fn server_only_items_interleave_by_server_position() {
        // Live [C,B,D,A,E], patch orders [A,B]: C and D were before A on the server.
        let server = items(&["C", "B", "D", "A", "E"]);
        let a = json!("A");
        let b = json!("B");
        let got = normalize(server.clone(), &[&a, &b], &server, Some("name"));
        assert_eq!(names(&got), ["C", "D", "A", "B", "E"]);
    }

    #[test]
    fn patch_order_wins_over_server_order() {
        let server = items(&["B", "C", "A"]);
        let mut merged = server.clone();
        merged.push(json!({"name": "D"}));
        let (a, b, d) = (json!("A"), json!("B"), json!("D"));
        let got = normalize(merged, &[&a, &b, &d], &server, Some("name"));
        assert_eq!(names(&got), ["C", "A", "B", "D"]);
    }

    #[test]
    fn scalars_use_their_value_as_identity() {
        let server = vec![json!("b"), json!("e"), json!("a")];
        let mut merged = server.clone();
        merged.push(json!("f"));
        let (a, b, f) = (json!("a"), json!("b"), json!("f"));
        let got = normalize(merged, &[&a, &b, &f], &server, None);
        assert_eq!(got, vec![json!("e"), json!("a"), json!("b"), json!("f")]);
    }
}
