//! Limits on what may be stored, as upstream has them: etcd's request size and a nesting depth
//! that every decoder (the store's loader, typed clients) can read back.

pub use keelson_apimachinery::patch::{encoded_len, MAX_DEPTH};
use serde_json::Value;

/// etcd's default request size limit (--max-request-bytes), which bounds an object upstream.
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// The path (upstream notation) of the first value nested deeper than `max` levels, if any.
/// Iterative, so a deep object cannot exhaust the stack here.
pub fn too_deep(obj: &Value, max: usize) -> Option<String> {
    let mut stack: Vec<(&Value, usize, String)> = vec![(obj, 0, String::new())];
    while let Some((v, depth, path)) = stack.pop() {
        let children: Vec<(&Value, String)> = match v {
            Value::Object(m) => m.iter().map(|(k, c)| (c, join(&path, k))).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, c)| (c, format!("{path}[{i}]")))
                .collect(),
            _ => continue,
        };
        if depth >= max && !children.is_empty() {
            return Some(path);
        }
        stack.extend(children.into_iter().map(|(c, p)| (c, depth + 1, p)));
    }
    None
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |v, _| json!({ "a": v }))
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(too_deep(&nested(3), 3), None);
        assert_eq!(too_deep(&nested(4), 3).as_deref(), Some("a.a.a"));
        let list = json!({"spec": {"x": [[[1]]]}});
        assert_eq!(too_deep(&list, 3).as_deref(), Some("spec.x[0]"));
        assert_eq!(too_deep(&nested(MAX_DEPTH), MAX_DEPTH), None);
    }

    #[test]
    fn length_is_the_compact_encoding() {
        let v = json!({"a": [1, "x"]});
        assert_eq!(encoded_len(&v), serde_json::to_vec(&v).unwrap().len());
    }
}
