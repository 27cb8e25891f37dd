//! propagationPolicy on DELETE, for the dependents of the object deleted (the objects whose
//! ownerReferences name its uid). Orphan removes those references before the owner goes.
//! Foreground keeps the owner, marked and holding the "foregroundDeletion" finalizer, while its
//! dependents are deleted, and lets it go with the last of them. Background (the default)
//! leaves the dependents to the garbage collector.

use crate::object;
use crate::resources::{self, Resource};
use crate::rest::{Api, Target};
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Precondition, StoreError, Write};
use serde_json::Value;

pub const FOREGROUND: &str = "foregroundDeletion";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

impl Propagation {
    pub fn parse(name: &str, v: Option<&str>) -> ApiResult<Propagation> {
        match v {
            None | Some("") | Some("Background") => Ok(Propagation::Background),
            Some("Orphan") => Ok(Propagation::Orphan),
            Some("Foreground") => Ok(Propagation::Foreground),
            Some(other) => Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "DeleteOptions.meta.k8s.io {name:?} is invalid: propagationPolicy: \
                     Unsupported value: {other:?}: supported values: \"Foreground\", \
                     \"Background\", \"Orphan\""
                ),
            )),
        }
    }
}

fn owner_refs(obj: &Value) -> &[Value] {
    object::meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn names_owner(obj: &Value, uid: &str) -> bool {
    owner_refs(obj).iter().any(|r| r["uid"] == uid)
}

/// The served kind stored under a key.
fn resource_of(key: &str) -> Option<&'static Resource> {
    resources::all()
        .into_iter()
        .find(|r| key.starts_with(&r.key_prefix()))
}

/// The objects whose ownerReferences name `owner`'s uid, with their keys: in the owner's
/// namespace, or anywhere for a cluster-scoped owner.
fn dependents(api: &Api, owner: &Value) -> Vec<(String, Entry)> {
    let uid = object::meta_str(owner, "uid");
    if uid.is_empty() {
        return Vec::new();
    }
    let ns = object::namespace(owner);
    let mut prefixes: Vec<String> = resources::all()
        .into_iter()
        .filter(|r| ns.is_empty() || r.namespaced)
        .map(|r| match ns {
            "" => r.key_prefix(),
            _ => format!("{}{ns}/", r.key_prefix()),
        })
        .collect();
    prefixes.sort();
    prefixes.dedup();
    prefixes
        .iter()
        .flat_map(|p| api.store.list_keyed(p).0)
        // Only objects whose bytes hold the uid are parsed.
        .filter(|(_, e)| e.json.windows(uid.len()).any(|w| w == uid.as_bytes()))
        .filter(|(_, e)| names_owner(&e.value(), uid))
        .collect()
}

/// Orphan: the dependents lose their references to `owner`, so nothing collects them.
pub async fn orphan(api: &Api, owner: &Value) -> ApiResult<()> {
    let uid = object::meta_str(owner, "uid");
    for (key, mut e) in dependents(api, owner) {
        for _ in 0..16 {
            let mut obj = (*e.value()).clone();
            let meta = object::meta_mut(&mut obj);
            if let Some(refs) = meta
                .get_mut("ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r["uid"] != uid);
                // An empty list is no list, as upstream serializes it.
                if refs.is_empty() {
                    meta.remove("ownerReferences");
                }
            }
            let w = Write {
                key: key.clone(),
                value: Some(obj),
                precondition: Precondition::Rev(e.rev),
            };
            match api.store.write(w).await {
                Err(StoreError::Conflict { .. }) => match api.store.get(&key) {
                    Some(now) => e = now,
                    None => break,
                },
                Err(StoreError::NotFound) | Ok(_) => break,
                Err(err) => return Err(ApiError::internal(err.to_string())),
            }
        }
    }
    Ok(())
}

/// Foreground: deletes the dependents of `owner`, then lets the owner go if none is left. A
/// dependent that has dependents of its own is deleted in the foreground too, as upstream's
/// garbage collector does, so that the owner waits for the whole tree (a Deployment for its
/// ReplicaSets' Pods); the others with background propagation.
pub async fn delete_dependents(api: &Api, owner_key: &str, owner: &Value) {
    for (key, e) in dependents(api, owner) {
        let Some(res) = resource_of(&key) else {
            continue;
        };
        let obj = e.value();
        let t = Target {
            res,
            namespace: object::namespace(&obj).to_string(),
            name: object::name(&obj).to_string(),
        };
        let policy = if dependents(api, &obj).is_empty() {
            "Background"
        } else {
            "Foreground"
        };
        let opts = super::DeleteOptions {
            propagation_policy: Some(policy.into()),
            ..Default::default()
        };
        if let Err(err) = Box::pin(super::delete(api, &t, &opts)).await {
            tracing::warn!(key, error = %err.message, "deleting a dependent in the foreground");
        }
    }
    release(api, owner_key).await;
}

/// After `removed` is gone: each owner it held back in the foreground goes once it has no
/// dependents left (and then its own owners, and so on).
pub async fn removed(api: &Api, removed: &Value) {
    let mut work = vec![removed.clone()];
    while let Some(obj) = work.pop() {
        for r in owner_refs(&obj) {
            let Some(res) = r["kind"].as_str().and_then(resources::by_kind) else {
                continue;
            };
            let ns = if res.namespaced {
                object::namespace(&obj)
            } else {
                ""
            };
            let key = res.key(ns, r["name"].as_str().unwrap_or(""));
            if let Some(gone) = release(api, &key).await {
                work.push(gone);
            }
        }
    }
}

/// Lets go every owner held in the foreground whose dependents are all gone, however they went
/// (an update that removed a dependent's last finalizer, the garbage collector, ...): the
/// periodic safety net beside `removed`.
pub async fn release_foreground_owners(api: &Api) -> usize {
    let mut prefixes: Vec<String> = resources::all()
        .into_iter()
        .map(Resource::key_prefix)
        .collect();
    prefixes.sort();
    prefixes.dedup();
    let mut released = 0;
    for p in prefixes {
        for (key, e) in api.store.list_keyed(&p).0 {
            // Only objects whose bytes name the finalizer are parsed.
            let named = e
                .json
                .windows(FOREGROUND.len())
                .any(|w| w == FOREGROUND.as_bytes());
            if named {
                if let Some(gone) = release(api, &key).await {
                    removed(api, &gone).await;
                    released += 1;
                }
            }
        }
    }
    released
}

/// Drops the foreground finalizer of the owner at `key` once it has no dependents, and the
/// owner with it when no other finalizer is left. Returns the owner if it was removed.
async fn release(api: &Api, key: &str) -> Option<Value> {
    for _ in 0..16 {
        let e = api.store.get(key)?;
        let owner = e.value();
        let held = object::is_deleting(&owner) && finalizer_list(&owner).contains(&FOREGROUND);
        if !held || !dependents(api, &owner).is_empty() {
            return None;
        }
        let mut next = (*owner).clone();
        if let Some(f) = object::meta_mut(&mut next)
            .get_mut("finalizers")
            .and_then(Value::as_array_mut)
        {
            f.retain(|v| v != FOREGROUND);
        }
        let remove = object::finalizers(&next) == 0;
        let w = Write {
            key: key.to_string(),
            value: (!remove).then_some(next),
            precondition: Precondition::Rev(e.rev),
        };
        match api.store.write(w).await {
            Ok(_) if remove => return Some((*owner).clone()),
            Ok(_) => return None,
            Err(StoreError::Conflict { .. }) => continue,
            Err(_) => return None,
        }
    }
    None
}

fn finalizer_list(obj: &Value) -> Vec<&str> {
    object::meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
