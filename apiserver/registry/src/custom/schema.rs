//! A CustomResourceDefinition's structural schema applied to its objects, as upstream's
//! apiextensions-apiserver does on every write: unknown fields pruned (kept under
//! x-kubernetes-preserve-unknown-fields), defaults filled in, then the object validated
//! (types, required, enum, bounds, lengths, patterns) with upstream's messages.

use crate::cause::Cause;
use crate::path::Path;
use serde_json::{Map, Value};

/// The fields every object has, whatever its schema says.
const ROOT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

fn preserves(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn int_or_string(s: &Value) -> bool {
    s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
}

fn properties(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

/// additionalProperties as a schema (a map's values); `true` reads as "anything".
fn additional(s: &Value) -> Option<&Value> {
    s.get("additionalProperties")
        .filter(|a| !a.is_boolean() || a.as_bool() == Some(true))
}

/// The structural rules upstream insists on, the parts that matter here: every node says
/// its type (unless int-or-string or preserving unknown fields), the root is an object.
pub(crate) fn structural(s: &Value, at: &Path, out: &mut Vec<Cause>) {
    fn walk(s: &Value, at: &Path, out: &mut Vec<Cause>) {
        super::cel::check_rules(s, at, out);
        let typed = s
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty());
        if !typed && !int_or_string(s) && !preserves(s) {
            out.push(Cause::required(
                at.child("type"),
                "must not be empty for specified object fields",
            ));
        }
        for (k, p) in properties(s).into_iter().flatten() {
            walk(p, &at.child("properties").key(k), out);
        }
        if let Some(items) = s.get("items") {
            walk(items, &at.child("items"), out);
        }
        if let Some(a) = additional(s).filter(|a| a.is_object()) {
            walk(a, &at.child("additionalProperties"), out);
        }
    }
    if s.get("type").and_then(Value::as_str) != Some("object") {
        out.push(Cause::invalid(
            at.child("type"),
            s.get("type").unwrap_or(&Value::Null),
            "must be object at the root",
        ));
    }
    walk(s, at, out);
}

/// Drops the fields the schema does not declare.
pub fn prune(obj: &mut Value, s: &Value) {
    prune_at(obj, s, true);
}

fn prune_at(obj: &mut Value, s: &Value, root: bool) {
    if preserves(s) && properties(s).is_none() && additional(s).is_none() {
        return;
    }
    match obj {
        Value::Object(m) => {
            let props = properties(s);
            let extra = additional(s);
            m.retain(|k, _| {
                (root && ROOT_FIELDS.contains(&k.as_str()))
                    || props.is_some_and(|p| p.contains_key(k))
                    || extra.is_some()
                    || preserves(s)
            });
            for (k, v) in m.iter_mut() {
                if root && ROOT_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    prune_at(v, ps, false);
                } else if let Some(a) = extra.filter(|a| a.is_object()) {
                    prune_at(v, a, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                items.iter_mut().for_each(|i| prune_at(i, is, false));
            }
        }
        _ => {}
    }
}

/// Fills in the schema's defaults for fields the object leaves out.
pub fn default(obj: &mut Value, s: &Value) {
    match obj {
        Value::Object(m) => {
            for (k, ps) in properties(s).into_iter().flatten() {
                if !m.contains_key(k) {
                    if let Some(d) = ps.get("default") {
                        m.insert(k.clone(), d.clone());
                    }
                }
                if let Some(v) = m.get_mut(k) {
                    default(v, ps);
                }
            }
            if let Some(a) = additional(s).filter(|a| a.is_object()) {
                for v in m.values_mut() {
                    default(v, a);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                items.iter_mut().for_each(|i| default(i, is));
            }
        }
        _ => {}
    }
}

/// Everything the object breaks of its schema; metadata is checked as every object's is.
pub fn validate(obj: &Value, s: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let Some(m) = obj.as_object() else {
        return out;
    };
    for (k, v) in m {
        if ROOT_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if let Some(ps) = properties(s).and_then(|p| p.get(k)) {
            check(v, ps, &Path::root().child(k), &mut out);
        }
    }
    required(m, s, &Path::root(), &mut out);
    out
}

fn required(m: &Map<String, Value>, s: &Value, at: &Path, out: &mut Vec<Cause>) {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = r.as_str() {
            if !m.contains_key(name) {
                out.push(Cause::required(at.child(name), ""));
            }
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(v: &Value, want: &str) -> bool {
    let have = type_name(v);
    have == want || (want == "number" && have == "integer")
}

fn check(v: &Value, s: &Value, at: &Path, out: &mut Vec<Cause>) {
    let field = at.to_string();
    if v.is_null() && s.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if int_or_string(s) {
        if !matches!(type_name(v), "integer" | "string") {
            out.push(Cause::type_invalid(
                at,
                v,
                &format!(
                    "{field} in body must be of type int-or-string: {:?}",
                    type_name(v)
                ),
            ));
            return;
        }
    } else if let Some(want) = s.get("type").and_then(Value::as_str) {
        if !type_matches(v, want) {
            out.push(Cause::type_invalid(
                at,
                v,
                &format!("{field} in body must be of type {want}: {:?}", type_name(v)),
            ));
            return;
        }
    }
    if let Some(options) = s.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            let shown: Vec<String> = options.iter().map(Value::to_string).collect();
            out.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {}: supported values: {}",
                    v,
                    shown.join(", ")
                ),
                field: field.clone(),
            });
        }
    }
    bounds(v, s, at, &field, out);
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if let Some(ps) = properties(s).and_then(|p| p.get(k)) {
                    check(child, ps, &at.child(k), out);
                } else if let Some(a) = additional(s).filter(|a| a.is_object()) {
                    check(child, a, &at.key(k), out);
                }
            }
            required(m, s, at, out);
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, is, &at.index(i), out);
                }
            }
        }
        _ => {}
    }
}

fn bounds(v: &Value, s: &Value, at: &Path, field: &str, out: &mut Vec<Cause>) {
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    let count = |k: &str| s.get(k).and_then(Value::as_u64).map(|n| n as usize);
    if let Some(x) = v.as_f64() {
        if let Some(max) = num("maximum") {
            if x > max {
                out.push(Cause::invalid(
                    at,
                    v,
                    &format!(
                        "{field} in body should be less than or equal to {}",
                        s["maximum"]
                    ),
                ));
            }
        }
        if let Some(min) = num("minimum") {
            if x < min {
                out.push(Cause::invalid(
                    at,
                    v,
                    &format!(
                        "{field} in body should be greater than or equal to {}",
                        s["minimum"]
                    ),
                ));
            }
        }
    }
    if let Some(text) = v.as_str() {
        let chars = text.chars().count();
        if let Some(max) = count("maxLength").filter(|m| chars > *m) {
            out.push(Cause::too_long(at, max));
        }
        if let Some(min) = count("minLength").filter(|m| chars < *m) {
            out.push(Cause::invalid(
                at,
                v,
                &format!("{field} in body should be at least {min} chars long"),
            ));
        }
        if let Some(p) = s.get("pattern").and_then(Value::as_str) {
            if regex::Regex::new(p).is_ok_and(|re| !re.is_match(text)) {
                out.push(Cause::invalid(
                    at,
                    v,
                    &format!("{field} in body should match '{p}'"),
                ));
            }
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(max) = count("maxItems").filter(|m| items.len() > *m) {
            out.push(Cause::too_many(at, items.len(), max));
        }
        if let Some(min) = count("minItems").filter(|m| items.len() < *m) {
            out.push(Cause::invalid(
                at,
                v,
                &format!("{field} in body should have at least {min} items"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "port": {"x-kubernetes-int-or-string": true},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }})
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_filled() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 2, "bogus": 1, "extra": {"anything": [1]}, "labels": {"a": "b"}}, "junk": true});
        prune(&mut obj, &schema());
        default(&mut obj, &schema());
        assert_eq!(
            obj["spec"],
            json!({"size": 2, "color": "red", "extra": {"anything": [1]}, "labels": {"a": "b"}})
        );
        assert!(obj.get("junk").is_none());
        assert_eq!(obj["metadata"]["name"], "a");
        assert!(validate(&obj, &schema()).is_empty());
    }

    #[test]
    fn invalid_objects_get_upstreams_messages() {
        let obj = json!({"spec": {"size": 11, "color": "pink", "port": true, "labels": {"a": 1}}});
        let msgs: Vec<String> = validate(&obj, &schema())
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(msgs, vec![
            "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"",
            "spec.labels[a]: Invalid value: 1: spec.labels[a] in body must be of type string: \"integer\"",
            "spec.port: Invalid value: true: spec.port in body must be of type int-or-string: \"boolean\"",
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
        ]);
        let missing = validate(&json!({"spec": {}}), &schema());
        assert_eq!(missing[0].field, "spec.size");
        assert_eq!(missing[0].message, "Required value");
    }

    #[test]
    fn schemas_must_be_structural() {
        let mut out = Vec::new();
        structural(
            &json!({"type": "object", "properties": {"a": {"description": "x"}}}),
            &Path::root(),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].field, "properties[a].type");
    }
}
