//! JSON merge patch (RFC 7386): objects merge recursively, `null` removes a key, anything else
//! (including arrays) replaces.

use serde_json::{Map, Value};

pub fn merge_patch(original: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut target = match original {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        let merged = merge_patch(target.get(key).unwrap_or(&Value::Null), value);
        target.insert(key.clone(), merged);
    }
    Value::Object(target)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (orig, patch, want) in cases {
            assert_eq!(merge_patch(&orig, &patch), want, "{orig} + {patch}");
        }
    }

    #[test]
    fn kubectl_style_label_and_replica_patch() {
        let dep = json!({"metadata": {"name": "web", "labels": {"app": "web", "old": "x"}},
                         "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a"}]}}}});
        let got = merge_patch(
            &dep,
            &json!({"metadata": {"labels": {"old": null, "new": "y"}}, "spec": {"replicas": 3}}),
        );
        assert_eq!(got["metadata"]["labels"], json!({"app": "web", "new": "y"}));
        assert_eq!(got["spec"]["replicas"], 3);
        assert_eq!(got["spec"]["template"], dep["spec"]["template"]);
    }
}
