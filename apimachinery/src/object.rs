//! Small accessors on objects held as JSON: metadata fields, timestamps, names.

use rand::Rng;
use serde_json::{Map, Value};

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// metadata as a mutable map, created when missing.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    as_map(as_map(obj).entry("metadata").or_insert(Value::Null))
}

/// `v` as a map, made an empty one first when it is anything else.
fn as_map(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    meta(obj)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
}

pub fn finalizers(obj: &Value) -> usize {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

/// The strings of the array at `key` (RBAC rules, groups, audiences); empty when absent, and
/// non-string items left out.
pub fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now plus `seconds`, in RFC 3339; a time past what can be written is the last one that can
/// (any grace period is accepted, as upstream does, without overflowing).
pub fn rfc3339_in(seconds: i64) -> String {
    chrono::Duration::try_seconds(seconds)
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .filter(|t| chrono::Datelike::year(t) <= 9999)
        .unwrap_or_else(|| chrono::DateTime::from_timestamp(253_402_300_799, 0).unwrap_or_default())
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The time of an RFC 3339 field, if it holds one.
pub fn timestamp(v: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    let s = v.as_str()?;
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// Sets `obj.<path>` to `value`, making each step an object first (whatever a client stored
/// there): writing into a malformed object never panics.
pub fn set_path(obj: &mut Value, path: &[&str], value: Value) {
    let mut cur = obj;
    for key in path {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else { return };
        cur = m.entry(key.to_string()).or_insert(Value::Null);
    }
    *cur = value;
}

/// generateName's suffix: 5 characters from the same alphabet upstream uses (no vowels).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .filter_map(|_| ALPHABET.get(rng.random_range(0..ALPHABET.len())))
        .map(|&b| char::from(b))
        .collect()
}

/// The object minus metadata and status: what a change of bumps metadata.generation.
pub fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "kind", "apiVersion"] {
            m.remove(k);
        }
    }
    v
}

/// Equality for no-op detection: resourceVersion and managedFields do not count.
pub fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    };
    strip(a) == strip(b)
}

/// PartialObjectMetadata for an object: what kube-rs metadata watches and Tables carry.
pub fn partial_metadata(obj: &Value) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(Value::Object(Map::new())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_part_ignores_status_and_metadata() {
        let a = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let b = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}, "status": {"y": 2}});
        assert_eq!(spec_part(&a), spec_part(&b));
    }

    #[test]
    fn same_content_ignores_resource_version() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}});
        assert!(same_content(&a, &b));
        assert!(!same_content(&a, &json!({"metadata": {"name": "b"}})));
    }

    #[test]
    fn far_future_times_do_not_overflow() {
        assert_eq!(rfc3339_in(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_in(i64::MAX / 1000), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_in(i64::MIN).len(), 20);
        assert!(timestamp(&json!(rfc3339_in(60))).is_some());
    }

    #[test]
    fn set_path_replaces_what_is_in_the_way() {
        let mut v = json!({"status": "broken"});
        set_path(&mut v, &["status", "phase"], json!("Terminating"));
        assert_eq!(v, json!({"status": {"phase": "Terminating"}}));
        let mut v = json!([1]);
        set_path(&mut v, &["a"], json!(1));
        assert_eq!(v, json!({"a": 1}));
    }

    #[test]
    fn suffix_is_five_safe_chars() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| !"aeiou01".contains(c)));
    }
}
