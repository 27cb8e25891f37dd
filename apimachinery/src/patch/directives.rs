//! The strategic merge patch directives that act on a whole map: `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`.

use serde_json::{Map, Value};

use super::identity::Seen;
use super::keys::{self, Field, ListMerge, Ty};
use super::order::{self, ident};
use super::{json_eq, PatchError};
use std::collections::HashSet;

pub(super) const DIRECTIVE: &str = "$patch";
pub(super) const RETAIN_KEYS: &str = "$retainKeys";
pub(super) const SET_ORDER: &str = "$setElementOrder/";
pub(super) const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

pub(super) fn bad(msg: impl Into<String>) -> PatchError {
    PatchError::BadStrategicPatch(msg.into())
}

pub(super) fn is_directive_key(key: &str) -> bool {
    key == RETAIN_KEYS || key.starts_with(SET_ORDER) || key.starts_with(DELETE_FROM)
}

/// `$retainKeys: [...]` clears live keys not listed; every key the patch sets must be listed.
pub(super) fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(list) = patch.get(RETAIN_KEYS) else {
        return Ok(());
    };
    let invalid = || bad("invalid patch format of retainKeys");
    let keep: HashSet<&str> = list
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

pub(super) fn delete_from_primitive_list(
    original: &mut Map<String, Value>,
    name: &str,
    values: &Value,
) -> Result<(), PatchError> {
    let values = values
        .as_array()
        .ok_or_else(|| bad("invalid patch format of primitive list"))?;
    let mut deleted = Seen::default();
    for v in values {
        deleted.insert(v);
    }
    if let Some(Value::Array(list)) = original.get_mut(name) {
        list.retain(|v| !deleted.contains(v));
    }
    Ok(())
}

/// Merges `patch[name]` into `original[name]` and orders the result by `$setElementOrder/name`.
/// Returns false when there is nothing to order (the field is being deleted with null).
pub(super) fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    name: &str,
    order: &Value,
    ty: Ty,
    merge_list: impl Fn(Vec<Value>, &[Value], Field) -> Result<Vec<Value>, PatchError>,
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
        let rest = order_ids.get(next..).unwrap_or_default();
        let found = ident(p, key).and_then(|id| rest.iter().position(|o| json_eq(o, id)));
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
