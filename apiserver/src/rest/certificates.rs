//! CertificateSigningRequest strategies (upstream pkg/registry/certificates): the server owns
//! who asked, and each write path owns its part of the status.

use super::Sub;
use crate::auth::User;
use crate::object;
use serde_json::{json, Map, Value};

const KIND: &str = "CertificateSigningRequest";
/// Conditions that only the `approval` subresource writes.
const APPROVAL: [&str; 2] = ["Approved", "Denied"];

/// On create: spec.username, uid, groups and extra are the requester's, whatever was sent.
pub fn set_requester(kind: &str, obj: &mut Value, user: &User) {
    if kind != KIND {
        return;
    }
    object::set_path(obj, &["spec", "username"], json!(user.name));
    object::set_path(obj, &["spec", "uid"], json!(user.uid));
    object::set_path(obj, &["spec", "groups"], json!(user.groups));
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("extra");
        if user.uid.is_empty() {
            spec.remove("uid");
        }
    }
}

fn conditions(v: &Value) -> Vec<Value> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_approval(c: &Value) -> bool {
    c.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| APPROVAL.contains(&t))
}

/// What a write through `sub` keeps of `old`, after the generic merge: the main resource
/// changes metadata only, `status` the certificate and the other conditions, `approval` the
/// Approved and Denied conditions only.
pub(super) fn keep_owned(kind: &str, sub: Sub, old: &Value, new: &mut Value) {
    if kind != KIND {
        return;
    }
    let old_spec = old.get("spec").cloned().unwrap_or(json!({}));
    object::set_path(new, &["spec"], old_spec);
    let sent = conditions(new);
    let mut status = old.get("status").cloned().unwrap_or(json!({}));
    match sub {
        Sub::Main | Sub::Binding | Sub::EphemeralContainers => {}
        Sub::Status => {
            let cert = new.pointer("/status/certificate").cloned();
            match cert {
                Some(c) => object::set_path(&mut status, &["certificate"], c),
                None => remove(&mut status, "certificate"),
            }
            let mut conds: Vec<Value> = conditions(old).into_iter().filter(is_approval).collect();
            conds.extend(sent.into_iter().filter(|c| !is_approval(c)));
            object::set_path(&mut status, &["conditions"], json!(conds));
        }
        Sub::Approval => {
            let mut conds: Vec<Value> = conditions(old)
                .into_iter()
                .filter(|c| !is_approval(c))
                .collect();
            conds.extend(sent.into_iter().filter(is_approval));
            object::set_path(&mut status, &["conditions"], json!(conds));
        }
    }
    stamp_conditions(&mut status, old);
    object::set_path(new, &["status"], status);
}

fn remove(v: &mut Value, key: &str) {
    if let Some(m) = v.as_object_mut() {
        m.remove(key);
    }
}

/// populateConditionTimestamps: lastUpdateTime now when unset; lastTransitionTime carried over
/// from the old condition of the same type and status, else now.
fn stamp_conditions(status: &mut Value, old: &Value) {
    let old_conds = conditions(old);
    let now = object::now_rfc3339();
    let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        fill(c, "lastUpdateTime", json!(now));
        let same = old_conds
            .iter()
            .find(|o| o.get("type") == c.get("type") && o.get("status") == c.get("status"));
        let since = same
            .and_then(|o| o.get("lastTransitionTime"))
            .filter(|t| !t.is_null())
            .cloned()
            .unwrap_or(json!(now));
        fill(c, "lastTransitionTime", since);
    }
}

fn fill(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), v);
    }
}
