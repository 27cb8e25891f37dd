//! Unknown fields: the fields of an object that its kind's schema does not declare, found by
//! walking the JSON beside the schema (what upstream's strict decoder reports, as it decodes
//! into Go structs). Maps (`additionalProperties`), objects without declared properties
//! (RawExtension, FieldsV1, JSON) and `x-kubernetes-preserve-unknown-fields` accept any key.

use super::components::V3_REFS;
use serde_json::{Map, Value};

/// The fields `schema` (in `schemas`) does not declare in `obj`, in upstream's notation
/// (`spec.containers[0].imagePullPolcy`); removed from `obj` when `remove`.
pub fn unknown_fields(
    schemas: &Map<String, Value>,
    schema: &Value,
    obj: &mut Value,
    remove: bool,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut w = Walk {
        schemas,
        remove,
        found: &mut found,
    };
    w.walk(schema, obj, &mut String::new());
    found
}

struct Walk<'a> {
    schemas: &'a Map<String, Value>,
    remove: bool,
    found: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn walk(&mut self, schema: &Value, v: &mut Value, path: &mut String) {
        let Some(schema) = resolve(self.schemas, schema) else {
            return;
        };
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
            return;
        }
        let extra = schema.get("additionalProperties").filter(|a| a.is_object());
        match v {
            Value::Object(obj) => {
                let props = schema.get("properties").and_then(Value::as_object);
                if props.is_none() && extra.is_none() {
                    return;
                }
                let mut unknown = Vec::new();
                for (key, x) in obj.iter_mut() {
                    let Some(sub) = props.and_then(|p| p.get(key)).or(extra) else {
                        unknown.push(key.clone());
                        continue;
                    };
                    let len = path.len();
                    push_key(path, key);
                    self.walk(sub, x, path);
                    path.truncate(len);
                }
                for key in unknown {
                    if self.remove {
                        obj.remove(&key);
                    }
                    let mut at = path.clone();
                    push_key(&mut at, &key);
                    self.found.push(at);
                }
            }
            Value::Array(items) => {
                let Some(item) = schema.get("items") else {
                    return;
                };
                for (i, x) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    self.walk(item, x, path);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// Follows `$ref` and a lone `allOf: [{$ref}]` (a described field) to the schema itself.
fn resolve<'a>(schemas: &'a Map<String, Value>, mut s: &'a Value) -> Option<&'a Value> {
    for _ in 0..64 {
        let target = match (s.get("$ref"), s.get("allOf").and_then(Value::as_array)) {
            (Some(r), _) => r,
            (None, Some(all)) if all.len() == 1 => match all.first().and_then(|a| a.get("$ref")) {
                Some(r) => r,
                None => return Some(s),
            },
            _ => return Some(s),
        };
        let name = target.as_str()?.strip_prefix(V3_REFS)?;
        s = schemas.get(name)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::components::built_in;
    use serde_json::json;

    fn pod_schema() -> Value {
        json!({ "$ref": "#/components/schemas/io.k8s.api.core.v1.Pod" })
    }

    #[test]
    fn unknown_fields_are_named_as_upstream_and_removed() {
        let c = built_in();
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web", "labels": { "any-key": "x" }, "annotations": { "b": "y" }, "bogus": 1 },
            "spec": {
                "containers": [{ "name": "c", "image": "i", "imagePullPolcy": "Always",
                                 "resources": { "limits": { "cpu": "1" } } }],
                "foo": true,
            },
        });
        let found = unknown_fields(&c.schemas, &pod_schema(), &mut pod, true);
        assert_eq!(
            found,
            [
                "metadata.bogus",
                "spec.containers[0].imagePullPolcy",
                "spec.foo"
            ]
        );
        assert!(pod["spec"].get("foo").is_none());
        assert!(pod["spec"]["containers"][0].get("imagePullPolcy").is_none());
        assert_eq!(pod["metadata"]["labels"]["any-key"], "x");
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }

    #[test]
    fn a_known_object_has_nothing_unknown() {
        let c = built_in();
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" },
            "spec": { "replicas": 2, "selector": { "matchLabels": { "app": "a" } },
                      "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": "25%" } },
                      "template": { "metadata": { "labels": { "app": "a" } },
                                    "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        });
        let before = d.clone();
        let schema = json!({ "$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment" });
        assert!(unknown_fields(&c.schemas, &schema, &mut d, true).is_empty());
        assert_eq!(d, before);
    }

    #[test]
    fn free_form_objects_and_preserved_fields_accept_anything() {
        let schemas = Map::new();
        let mut v = json!({ "raw": { "anything": { "deep": 1 } }, "kept": { "x": 1 }, "typo": 2 });
        let schema = json!({
            "type": "object",
            "properties": {
                "raw": { "type": "object" },
                "kept": { "type": "object", "properties": {}, "x-kubernetes-preserve-unknown-fields": true },
            },
        });
        assert_eq!(unknown_fields(&schemas, &schema, &mut v, true), ["typo"]);
        assert_eq!(v["raw"]["anything"]["deep"], 1);
        assert_eq!(v["kept"]["x"], 1);
    }
}
