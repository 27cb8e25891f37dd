//! Strategic merge patch, with upstream semantics (`k8s.io/apimachinery/pkg/util/strategicpatch`):
//! maps merge recursively and `null` deletes a key; lists follow the field's rule in [`keys`]:
//! replaced, merged by a key, or unioned as a set of scalars. Directives:
//! `$patch: replace|delete` (in a map, or as a list element), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.
//!
//! Unlike upstream, values that are new to the live object are merged into an empty value rather
//! than copied verbatim, so directives and nulls inside them never reach storage.

use serde_json::{Map, Value};

use super::directives::{
    bad, delete_from_primitive_list, is_directive_key, retain_keys, set_element_order, DELETE_FROM,
    DIRECTIVE, SET_ORDER,
};
use super::identity::{canonical, Seen};
use super::keys::{self, Field, ListMerge, Ty};
use super::order;
use super::{json_eq, PatchError};
use std::collections::{HashMap, HashSet};

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
    let mut ordered = HashSet::new();
    for (key, order) in patch {
        if let Some(name) = key.strip_prefix(SET_ORDER) {
            if set_element_order(&mut original, patch, name, order, ty, merge_list)? {
                ordered.insert(name);
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

pub(super) fn merge_list(
    live: Vec<Value>,
    patch: &[Value],
    rule: Field,
) -> Result<Vec<Value>, PatchError> {
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
    let mut seen = Seen::default();
    for v in live.iter().chain(patch) {
        if seen.insert(v) {
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
    let mut deleted = Seen::default();
    for p in patch {
        let Value::Object(m) = p else {
            return Err(bad(format!("list element {p} is not a map")));
        };
        match m.get(DIRECTIVE).map(|d| (d, d.as_str())) {
            None => items.push(m),
            Some((_, Some("delete"))) => {
                deleted.insert(m.get(key).ok_or_else(|| missing_key(p, key))?);
            }
            Some((_, Some("replace"))) => replace = true,
            Some((_, Some("merge"))) => {
                return Err(bad("merging lists cannot yet be specified in the patch"))
            }
            Some((d, _)) => return Err(bad(format!("unknown patch type {d} in map {p}"))),
        }
    }
    live.retain(|l| !l.get(key).is_some_and(|id| deleted.contains(id)));
    if replace {
        return items
            .into_iter()
            .map(|m| merge_map(Map::new(), m, ty).map(Value::Object))
            .collect();
    }
    let server = live.clone();
    let mut order = Vec::with_capacity(items.len());
    // Where each key first sits in `live` (by canonical text; a rare collision of unequal
    // values falls back to a scan).
    let mut at: HashMap<String, usize> = HashMap::new();
    for (i, l) in live.iter().enumerate() {
        if let Some(id) = l.get(key) {
            at.entry(canonical(id)).or_insert(i);
        }
    }
    for m in items {
        let id = m
            .get(key)
            .ok_or_else(|| missing_key(&Value::Object(m.clone()), key))?;
        order.push(id);
        let text = canonical(id);
        let found = match at.get(&text) {
            None => None,
            Some(&i) if live.get(i).is_some_and(|l| same(l, id)) => Some(i),
            Some(_) => live.iter().position(|l| same(l, id)),
        };
        match found.and_then(|i| live.get_mut(i)) {
            Some(slot) => {
                let Value::Object(lm) = slot.take() else {
                    return Err(bad(format!("list element {slot} is not a map")));
                };
                *slot = Value::Object(merge_map(lm, m, ty)?);
            }
            None => {
                at.entry(text).or_insert(live.len());
                live.push(Value::Object(merge_map(Map::new(), m, ty)?));
            }
        }
    }
    Ok(order::normalize(live, &order, &server, Some(key)))
}
