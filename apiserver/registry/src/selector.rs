//! Label selectors as written in `spec.selector` of apps objects (matchLabels/matchExpressions)
//! and as plain maps (Service `spec.selector`): matching and the text kubectl shows.

use crate::json::{items, map_at, str_at};
use serde_json::{Map, Value};

fn values(expr: &Value) -> Vec<&str> {
    items(expr, "values")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether a LabelSelector matches a set of labels. An empty selector matches everything.
pub fn matches(selector: &Value, labels: &Map<String, Value>) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = map_at(selector, "matchLabels")
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k).is_some() && label(k) == v.as_str());
    match_labels
        && items(selector, "matchExpressions").iter().all(|e| {
            let key = str_at(e, "key");
            let vals = values(e);
            match str_at(e, "operator") {
                "In" => label(key).is_some_and(|v| vals.contains(&v)),
                "NotIn" => !label(key).is_some_and(|v| vals.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        })
}

/// Upstream's `labels.Selector.String()`: requirements sorted by key, e.g.
/// `app=web,tier in (a,b),!legacy`.
pub fn to_text(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    for (k, v) in map_at(selector, "matchLabels").into_iter().flatten() {
        reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
    }
    for e in items(selector, "matchExpressions") {
        let key = str_at(e, "key");
        let mut vals = values(e);
        vals.sort_unstable();
        let text = match str_at(e, "operator") {
            "In" => format!("{key} in ({})", vals.join(",")),
            "NotIn" => format!("{key} notin ({})", vals.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op}"),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort();
    let texts: Vec<String> = reqs.into_iter().map(|(_, t)| t).collect();
    texts.join(",")
}

/// Upstream's `labels.FormatLabels`: `a=1,b=2`, or `<none>` when empty.
pub fn format_labels(labels: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "legacy", "operator": "DoesNotExist"}]});
        assert!(matches(&sel, &labels(json!({"app": "web", "tier": "b"}))));
        assert!(!matches(&sel, &labels(json!({"app": "web", "tier": "c"}))));
        assert!(!matches(&sel, &labels(json!({"app": "db", "tier": "a"}))));
        assert!(!matches(
            &sel,
            &labels(json!({"app": "web", "tier": "a", "legacy": "1"}))
        ));
        assert!(matches(&json!({}), &labels(json!({"x": "y"}))));
    }

    #[test]
    fn text_forms() {
        let sel = json!({"matchLabels": {"tier": "fe", "app": "web"},
            "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["b", "a"]},
                                 {"key": "x", "operator": "Exists"}]});
        assert_eq!(to_text(&sel), "app=web,env notin (a,b),tier=fe,x");
        assert_eq!(
            format_labels(json!({"b": "2", "a": "1"}).as_object()),
            "a=1,b=2"
        );
        assert_eq!(format_labels(None), "<none>");
    }
}
