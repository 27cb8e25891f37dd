//! Strategic merge patch, with upstream semantics (`k8s.io/apimachinery/pkg/util/strategicpatch`):
//! maps merge recursively and `null` deletes a key; lists follow the field's rule in [`keys`]:
//! replaced, merged by a key, or unioned as a set of scalars. Directives:
//! `$patch: replace|delete` (in a map, or as a list element), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.
//!
//! Unlike upstream, values that are new to the live object are merged into an empty value rather
//! than copied verbatim, so directives and nulls inside them never reach storage.

use serde_json::{Map, Value};

use super::keys::{self, Field, ListMerge, Ty};
use super::order::{self, ident};
use super::{json_eq, PatchError};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Applies `patch` to `original`; `kind` selects the list merge keys (unknown kinds get
/// untagged-field behaviour: lists replaced, maps merged).
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    kind: &str,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadPatch(
            "a strategic merge patch must be a JSON object".into(),
        ));
    };
    let Value::Object(original) = original else {
        return Err(PatchError::BadPatch(
            "the object to patch must be a JSON object".into(),
        ));
    };
    merge_map(original.clone(), patch, keys::root(kind)).map(Value::Object)
}

fn bad(msg: impl Into<String>) -> PatchError {
    PatchError::BadStrategicPatch(msg.into())
}

fn is_directive_key(key: &str) -> bool {
    key == RETAIN_KEYS || key.starts_with(SET_ORDER) || key.starts_with(DELETE_FROM)
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    ty: Ty,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(DIRECTIVE);
                merge_map(Map::new(), &rest, ty)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad(format!(
                "unknown patch type {directive} in map {}",
                Value::Object(patch.clone())
            ))),
        };
    }
    retain_keys(&mut original, patch)?;
    // Ordered lists are merged together with their order directive, then skipped below.
    let mut ordered = Vec::new();
    for (key, order) in patch {
        if let Some(name) = key.strip_prefix(SET_ORDER) {
            if set_element_order(&mut original, patch, name, order, ty)? {
                ordered.push(name);
            }
        }
    }
    for (key, value) in patch {
        if is_directive_key(key) || ordered.contains(&key.as_str()) {
            continue;
        }
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let rule = keys::lookup(ty, key);
        match original.get_mut(key) {
            Some(slot) => {
                let live = slot.take();
                *slot = merge_value(live, value, rule)?;
            }
            None => {
                original.insert(key.clone(), fresh(value, rule)?);
            }
        }
    }
    for (key, values) in patch {
        if let Some(name) = key.strip_prefix(DELETE_FROM) {
            delete_from_primitive_list(&mut original, name, values)?;
        }
    }
    Ok(original)
}

fn merge_value(live: Value, patch: &Value, rule: Field) -> Result<Value, PatchError> {
    match (live, patch) {
        (Value::Object(o), Value::Object(p)) => merge_map(o, p, rule.ty).map(Value::Object),
        (Value::Array(o), Value::Array(p)) => merge_list(o, p, rule).map(Value::Array),
        (_, p) => fresh(p, rule),
    }
}

/// A patch value for a field the live object lacks (or holds with another JSON type).
fn fresh(patch: &Value, rule: Field) -> Result<Value, PatchError> {
    match patch {
        Value::Object(p) => merge_map(Map::new(), p, rule.ty).map(Value::Object),
        Value::Array(p) => merge_list(Vec::new(), p, rule).map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// `$retainKeys: [...]` clears live keys not listed; every key the patch sets must be listed.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(list) = patch.get(RETAIN_KEYS) else {
        return Ok(());
    };
    let invalid = || bad("invalid patch format of retainKeys");
    let keep: Vec<&str> = list
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect())
        .ok_or_else(invalid)?;
    let unlisted = patch
        .iter()
        .any(|(k, v)| !v.is_null() && !is_directive_key(k) && !keep.contains(&k.as_str()));
    if unlisted {
        return Err(invalid());
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

fn delete_from_primitive_list(
    original: &mut Map<String, Value>,
    name: &str,
    values: &Value,
) -> Result<(), PatchError> {
    let values = values
        .as_array()
        .ok_or_else(|| bad("invalid patch format of primitive list"))?;
    if let Some(Value::Array(list)) = original.get_mut(name) {
        list.retain(|v| !values.iter().any(|d| json_eq(v, d)));
    }
    Ok(())
}

/// Merges `patch[name]` into `original[name]` and orders the result by `$setElementOrder/name`.
/// Returns false when there is nothing to order (the field is being deleted with null).
fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    name: &str,
    order: &Value,
    ty: Ty,
) -> Result<bool, PatchError> {
    let invalid = || bad("invalid patch format of setElementOrder list");
    let order = order.as_array().ok_or_else(invalid)?;
    let patch_list = match patch.get(name) {
        None => None,
        Some(Value::Null) => return Ok(false),
        Some(Value::Array(a)) => Some(a),
        Some(_) => return Err(invalid()),
    };
    let rule = keys::lookup(ty, name);
    let key = match rule.list {
        ListMerge::ByKey(k) => Some(k),
        _ => None,
    };
    let order_ids = order
        .iter()
        .map(|o| ident(o, key))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(invalid)?;
    if let Some(p) = patch_list {
        check_patch_follows_order(p, &order_ids, key, order)?;
    }
    let live = match original.get(name) {
        Some(Value::Array(a)) => Some(a.clone()),
        _ => None,
    };
    let merged = match (&live, patch_list) {
        (None, None) => return Ok(true),
        (Some(l), None) => l.clone(),
        (l, Some(p)) => merge_list(l.clone().unwrap_or_default(), p, rule)?,
    };
    let sorted = if rule.list == ListMerge::Replace {
        merged
    } else {
        order::normalize(merged, &order_ids, live.as_deref().unwrap_or_default(), key)
    };
    original.insert(name.to_string(), Value::Array(sorted));
    Ok(true)
}

/// The patch list's elements must appear in `$setElementOrder` and in the same relative order.
fn check_patch_follows_order(
    patch: &[Value],
    order_ids: &[&Value],
    key: Option<&str>,
    order: &[Value],
) -> Result<(), PatchError> {
    let mut next = 0;
    for p in patch.iter().filter(|p| p.get(DIRECTIVE).is_none()) {
        let found =
            ident(p, key).and_then(|id| order_ids[next..].iter().position(|o| json_eq(o, id)));
        match found {
            Some(i) => next += i + 1,
            None => {
                return Err(bad(format!(
                    "the order in patch list {} doesn't match $setElementOrder list {}",
                    Value::Array(patch.to_vec()),
                    Value::Array(order.to_vec())
                )))
            }
        }
    }
    Ok(())
}

#[derive(PartialEq)]
enum Elements {
    Empty,
    Scalars,
    Maps,
}

fn element_kind(live: &[Value], patch: &[Value]) -> Result<Elements, PatchError> {
    let mut kind = Elements::Empty;
    for v in live.iter().chain(patch) {
        let this = match v {
            Value::Array(_) => return Err(bad("lists of lists are not supported")),
            Value::Object(_) => Elements::Maps,
            _ => Elements::Scalars,
        };
        if kind != Elements::Empty && kind != this {
            return Err(bad("list element types are not identical"));
        }
        kind = this;
    }
    Ok(kind)
}

fn merge_list(live: Vec<Value>, patch: &[Value], rule: Field) -> Result<Vec<Value>, PatchError> {
    if rule.list == ListMerge::Replace {
        return Ok(patch.to_vec());
    }
    match (element_kind(&live, patch)?, rule.list) {
        (Elements::Empty, _) => Ok(live),
        (Elements::Scalars, _) => Ok(merge_scalars(live, patch)),
        (Elements::Maps, ListMerge::ByKey(key)) => merge_keyed(live, patch, key, rule.ty),
        (Elements::Maps, _) => Err(bad("cannot merge lists of maps without a merge key")),
    }
}

/// Set union, keeping first occurrences, then ordered by the patch.
fn merge_scalars(live: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(live.len() + patch.len());
    for v in live.iter().chain(patch) {
        if !merged.iter().any(|m| json_eq(m, v)) {
            merged.push(v.clone());
        }
    }
    let order: Vec<&Value> = patch.iter().collect();
    order::normalize(merged, &order, &live, None)
}

fn missing_key(element: &Value, key: &str) -> PatchError {
    bad(format!(
        "map: {element} does not contain declared merge key: {key}"
    ))
}

fn merge_keyed(
    mut live: Vec<Value>,
    patch: &[Value],
    key: &str,
    ty: Ty,
) -> Result<Vec<Value>, PatchError> {
    let same = |l: &Value, id: &Value| l.get(key).is_some_and(|v| json_eq(v, id));
    let mut items = Vec::new();
    let mut replace = false;
    for p in patch {
        let Value::Object(m) = p else {
            return Err(bad(format!("list element {p} is not a map")));
        };
        match m.get(DIRECTIVE).map(|d| (d, d.as_str())) {
            None => items.push(m),
            Some((_, Some("delete"))) => {
                let id = m.get(key).ok_or_else(|| missing_key(p, key))?;
                live.retain(|l| !same(l, id));
            }
            Some((_, Some("replace"))) => replace = true,
            Some((_, Some("merge"))) => {
                return Err(bad("merging lists cannot yet be specified in the patch"))
            }
            Some((d, _)) => return Err(bad(format!("unknown patch type {d} in map {p}"))),
        }
    }
    if replace {
        return items
            .into_iter()
            .map(|m| merge_map(Map::new(), m, ty).map(Value::Object))
            .collect();
    }
    let server = live.clone();
    let mut order = Vec::with_capacity(items.len());
    for m in items {
        let id = m
            .get(key)
            .ok_or_else(|| missing_key(&Value::Object(m.clone()), key))?;
        order.push(id);
        match live.iter().position(|l| same(l, id)) {
            Some(i) => {
                let Value::Object(lm) = live[i].take() else {
                    return Err(bad(format!("list element {} is not a map", live[i])));
                };
                live[i] = Value::Object(merge_map(lm, m, ty)?);
            }
            None => live.push(Value::Object(merge_map(Map::new(), m, ty)?)),
        }
    }
    Ok(order::normalize(live, &order, &server, Some(key)))
}
