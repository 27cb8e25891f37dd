//! Field checks shared by several kinds: labels, names, integers, enums, immutability, selectors, ports.

use crate::cause::Cause;
use crate::json::{items, map_at, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

/// One Invalid cause per message from a `names` check.
pub(crate) fn name_check(errs: Vec<String>, path: &Path, value: &str, out: &mut Vec<Cause>) {
    for msg in errs {
        out.push(Cause::invalid(path, &json!(value), &msg));
    }
}

/// Label maps (metadata.labels, selectors, nodeSelector): key and value syntax.
pub(crate) fn labels(map: Option<&Value>, path: &Path, out: &mut Vec<Cause>) {
    let Some(map) = map.and_then(Value::as_object) else {
        return;
    };
    for (k, v) in map {
        name_check(names::qualified_name(k), path, k, out);
        match v.as_str() {
            Some(s) => name_check(names::label_value(s), path, s, out),
            None => out.push(Cause::invalid(path, v, "label values must be strings")),
        }
    }
}

/// An integer field: None when absent; an Invalid cause when present but not an integer.
pub(crate) fn int_field(obj: &Value, key: &str, path: &Path, out: &mut Vec<Cause>) -> Option<i64> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => {
            let n = v.as_i64();
            if n.is_none() {
                out.push(Cause::invalid(path.child(key), v, "must be an integer"));
            }
            n
        }
    }
}

/// An integer field that, when set, must be at least `min` (`msg` says so otherwise).
pub(crate) fn at_least(
    obj: &Value,
    key: &str,
    min: i64,
    msg: &str,
    path: &Path,
    out: &mut Vec<Cause>,
) -> Option<i64> {
    let n = int_field(obj, key, path, out)?;
    if n < min {
        out.push(Cause::invalid(path.child(key), &json!(n), msg));
    }
    Some(n)
}

pub(crate) fn non_negative(obj: &Value, key: &str, path: &Path, out: &mut Vec<Cause>) {
    at_least(obj, key, 0, "must be greater than or equal to 0", path, out);
}

/// A string field that must be one of `supported` when set (or always, if `required`).
pub(crate) fn one_of(
    obj: &Value,
    key: &str,
    supported: &[&str],
    required: bool,
    path: &Path,
    out: &mut Vec<Cause>,
) {
    let value = str_at(obj, key);
    if value.is_empty() {
        if required {
            out.push(Cause::required(path.child(key), ""));
        }
    } else if !supported.contains(&value) {
        out.push(Cause::not_supported(
            path.child(key),
            &json!(value),
            supported,
        ));
    }
}

/// Upstream's ValidateImmutableField.
pub(crate) fn immutable(new: &Value, old: &Value, path: &Path, out: &mut Vec<Cause>) {
    if new != old {
        out.push(Cause::invalid(path, new, "field is immutable"));
    }
}

/// A metav1.LabelSelector (matchLabels + matchExpressions).
pub(crate) fn label_selector(sel: &Value, path: &Path, out: &mut Vec<Cause>) {
    labels(sel.get("matchLabels"), &path.child("matchLabels"), out);
    let exprs = path.child("matchExpressions");
    for (i, e) in items(sel, "matchExpressions").iter().enumerate() {
        let p = exprs.index(i);
        let key = str_at(e, "key");
        name_check(names::qualified_name(key), &p.child("key"), key, out);
        let has_values = !items(e, "values").is_empty();
        match str_at(e, "operator") {
            "In" | "NotIn" if !has_values => out.push(Cause::required(
                p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => out.push(Cause::forbidden(
                p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => out.push(Cause::invalid(
                p.child("operator"),
                &json!(op),
                "not a valid selector operator",
            )),
        }
        for (j, v) in items(e, "values").iter().enumerate() {
            let s = v.as_str().unwrap_or("");
            name_check(names::label_value(s), &p.child("values").index(j), s, out);
        }
    }
}

/// True when a LabelSelector selects nothing in particular (and so everything).
pub(crate) fn selector_is_empty(sel: &Value) -> bool {
    map_at(sel, "matchLabels").is_none_or(|m| m.is_empty())
        && items(sel, "matchExpressions").is_empty()
}

/// A port given as a number or an IANA name (Service targetPort, probe ports).
pub(crate) fn int_or_name_port(v: Option<&Value>, path: &Path, out: &mut Vec<Cause>) {
    match v {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            for msg in names::port_number(n) {
                out.push(Cause::invalid(path, &json!(n), &msg));
            }
        }
        Some(Value::String(s)) => name_check(names::port_name(s), path, s, out),
        Some(other) => out.push(Cause::invalid(path, other, "must be a port number or name")),
        None => {}
    }
}

pub(crate) const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
