//! DELETE: preconditions, graceful deletion of Pods (the node agent removes them), finalizers
//! (the object stays, marked, until they are gone), and allocations returned on removal.

use self::propagation::Propagation;
use super::read::{list_entries, ListParams};
use super::service_allocation::Reservation;
use super::{store_error, Api, Target};
use crate::object::{self, meta_mut};
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Precondition, StoreError, Write};
use serde::Deserialize;
use serde_json::{json, Value};

pub(super) mod propagation;

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub preconditions: Option<Preconditions>,
    pub dry_run: Option<Vec<String>>,
}

impl DeleteOptions {
    /// The query's dryRun, gracePeriodSeconds and propagationPolicy, where the body left them
    /// out (upstream reads DeleteOptions from either).
    pub fn fill_from_query(&mut self, p: &ListParams) {
        if self.dry_run.is_none() {
            self.dry_run = p.dry_run.clone().filter(|d| !d.is_empty()).map(|d| vec![d]);
        }
        self.grace_period_seconds = self.grace_period_seconds.or(p.grace_period_seconds);
        if self.propagation_policy.is_none() {
            self.propagation_policy = p.propagation_policy.clone();
        }
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The longest grace period kept (about 68 years): larger ones are clamped to it, so that
/// nothing that adds it to a time overflows.
const MAX_GRACE_SECONDS: i64 = i32::MAX as i64;

/// The grace period a Pod gets: none when it never ran on a node or has finished.
fn pod_grace(pod: &Value, asked: Option<i64>) -> i64 {
    let unscheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if unscheduled || finished {
        return 0;
    }
    asked
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .clamp(0, MAX_GRACE_SECONDS)
}

/// Deletes one object. Returns the object as it is after the call (marked, or last seen); with
/// dryRun, as it would be, and nothing changes.
pub async fn delete(api: &Api, t: &Target, opts: &DeleteOptions) -> ApiResult<Entry> {
    let policy = Propagation::parse(&t.name, opts.propagation_policy.as_deref())?;
    let dry = opts.dry_run.as_ref().is_some_and(|d| !d.is_empty());
    for _ in 0..16 {
        let cur = api.get_entry(t)?;
        check_preconditions(opts, &cur)?;
        let grace = if t.res.kind == "Pod" {
            pod_grace(&cur.obj, opts.grace_period_seconds)
        } else {
            0
        };
        let foreground = policy == Propagation::Foreground;
        let keep = grace > 0
            || foreground
            || object::finalizers(&cur.obj) > 0
            || namespace_has_content(api, t);
        let value = if keep {
            let mut marked = (*cur.obj).clone();
            if !mark_deleting(&mut marked, grace, foreground) {
                return Ok(cur);
            }
            Some(marked)
        } else {
            None
        };
        if dry {
            return Ok(match value {
                Some(v) => Entry::new(cur.rev, v),
                None => cur,
            });
        }
        if policy == Propagation::Orphan {
            propagation::orphan(api, &cur.obj).await?;
        }
        let w = Write {
            key: t.key(),
            value,
            precondition: Precondition::Rev(cur.rev),
        };
        match api.store.write(w).await {
            Ok(e) if keep => {
                if foreground {
                    propagation::delete_dependents(api, &t.key(), &cur.obj).await;
                }
                return Ok(e);
            }
            Ok(e) => {
                if t.res.kind == "Service" {
                    Reservation::release_all(&cur.obj).commit(&api.store).await;
                }
                propagation::removed(api, &cur.obj).await;
                return Ok(e);
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_error(t, e)),
        }
    }
    Err(ApiError::conflict(t.res.group, t.res.plural, &t.name))
}

fn check_preconditions(opts: &DeleteOptions, cur: &Entry) -> ApiResult<()> {
    let Some(p) = &opts.preconditions else {
        return Ok(());
    };
    let uid = object::meta_str(&cur.obj, "uid");
    if p.uid.as_deref().is_some_and(|u| u != uid) {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {uid}",
                p.uid.as_deref().unwrap_or("")
            ),
        ));
    }
    if p.resource_version
        .as_deref()
        .is_some_and(|r| r != cur.rev.to_string())
    {
        return Err(ApiError::new(409, "Conflict", format!(
            "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {}",
            p.resource_version.as_deref().unwrap_or(""), cur.rev
        )));
    }
    Ok(())
}

/// Sets deletionTimestamp (now + grace) once; a later delete may only shorten the grace. In the
/// foreground, the object also holds the foregroundDeletion finalizer until its dependents are
/// gone. Returns false when nothing changes.
fn mark_deleting(obj: &mut Value, grace: i64, foreground: bool) -> bool {
    let deleting = object::is_deleting(obj);
    let old_grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    let add_finalizer = foreground
        && !obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v == propagation::FOREGROUND));
    let shorter = !deleting || old_grace.is_none_or(|g| g > grace);
    if !shorter && !add_finalizer {
        return false;
    }
    let m = meta_mut(obj);
    if shorter {
        m.insert("deletionTimestamp".into(), json!(object::rfc3339_in(grace)));
        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
    }
    if add_finalizer {
        let f = m.entry("finalizers").or_insert_with(|| json!([]));
        if !f.is_array() {
            *f = json!([]);
        }
        if let Some(a) = f.as_array_mut() {
            a.push(json!(propagation::FOREGROUND));
        }
    }
    if obj["kind"] == "Namespace" {
        object::set_path(obj, &["status", "phase"], json!("Terminating"));
    }
    true
}

/// A Namespace with objects in it is marked Terminating; it goes once it is empty.
fn namespace_has_content(api: &Api, t: &Target) -> bool {
    if t.res.kind != "Namespace" {
        return false;
    }
    crate::resources::all()
        .into_iter()
        .filter(|r| r.namespaced)
        .any(|r| {
            !api.store
                .list(&format!("{}{}/", r.key_prefix(), t.name))
                .0
                .is_empty()
        })
}

/// DELETE on a collection: every object that matches the selectors.
pub async fn delete_collection(
    api: &Api,
    t: &Target,
    params: &ListParams,
    opts: &DeleteOptions,
) -> ApiResult<Vec<Entry>> {
    let (items, _) = list_entries(api, t, params)?;
    let mut opts = opts.clone();
    opts.fill_from_query(params);
    let opts = &opts;
    let mut out = Vec::new();
    for e in items {
        let one = Target {
            name: object::name(&e.obj).to_string(),
            namespace: object::namespace(&e.obj).to_string(),
            ..t.clone()
        };
        match delete(api, &one, opts).await {
            Ok(e) => out.push(e),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
