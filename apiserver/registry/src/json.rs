//! Small read and write helpers over `serde_json::Value`; absent and wrongly typed fields read
//! as empty so rules never panic on client input.

use serde_json::{Map, Value};

pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn map_at<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

pub(crate) fn int_at(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

pub(crate) fn bool_at(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// Follows a chain of object keys.
pub(crate) fn at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |cur, k| cur.get(*k))
}

/// Sets `key` when it is absent or null (upstream defaults only fill zero values).
pub(crate) fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), value);
        }
        Some(_) => {}
    }
}

/// True when `key` is absent, null, or an empty string or zero.
pub(crate) fn is_unset(m: &Map<String, Value>, key: &str) -> bool {
    match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(_) => false,
    }
}

/// The object under `key`, created empty when absent or null; None when it is some other type.
pub(crate) fn object_mut<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    default(m, key, Value::Object(Map::new()));
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// Each object element of the array under `key`, if there is one.
pub(crate) fn each_object_mut(
    m: &mut Map<String, Value>,
    key: &str,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    if let Some(list) = m.get_mut(key).and_then(Value::as_array_mut) {
        list.iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(&mut f);
    }
}
