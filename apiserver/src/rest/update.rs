//! PUT and PATCH: both compute a new object from the stored one and commit it with a
//! compare-and-swap on its resourceVersion. A patch (or a PUT without resourceVersion) retries
//! on a conflict with a concurrent writer; a PUT with a stale resourceVersion gets 409.

use super::create::{admit, check_namespace_field, check_type, off_workers_if_large, Origin};
use super::service_allocation::{self, Reservation};
use super::{certificates, create, store_error, Api, Sub, Target};
use crate::negotiate::PatchType;
use crate::object::{self, meta_mut};
use crate::openapi::FieldCheck;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Precondition, StoreError, Write};
use keelson_apimachinery::patch;
use keelson_apiserver_registry::limits;
use serde_json::{json, Value};
use std::sync::Arc;

const MAX_RETRIES: usize = 16;

/// Carries over what clients cannot change, and what belongs to the other part of the object.
fn merge_owned(t: &Target, old: &Value, new: &mut Value, sub: Sub) -> ApiResult<()> {
    check_type(t.res, new)?;
    check_namespace_field(t.res, &t.namespace, new)?;
    let given = object::name(new).to_string();
    if given.is_empty() {
        meta_mut(new).insert("name".into(), json!(t.name));
    } else if given != t.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({})",
            t.name
        )));
    }
    if sub == Sub::EphemeralContainers {
        *new = with_ephemeral_containers(old, new.pointer("/spec/ephemeralContainers"));
        return Ok(());
    }
    if sub != Sub::Main && sub != Sub::Binding {
        let status = new.get("status").cloned().unwrap_or(json!({}));
        *new = old.clone();
        new["status"] = status;
        certificates::keep_owned(t.res.kind, sub, old, new);
        return Ok(());
    }
    let om = object::meta(old).cloned().unwrap_or_default();
    let m = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match om.get(k) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    m.remove("managedFields");
    m.remove("selfLink");
    if t.res.has_status() && sub != Sub::Binding {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    certificates::keep_owned(t.res.kind, sub, old, new);
    Ok(())
}

/// The stored Pod with the written ephemeral containers (none when the write has none), as
/// upstream's dropNonEphemeralContainerUpdates: metadata, the rest of the spec and the status
/// stay as stored.
fn with_ephemeral_containers(old: &Value, list: Option<&Value>) -> Value {
    let mut pod = old.clone();
    match (pod.get_mut("spec").and_then(Value::as_object_mut), list) {
        (Some(spec), Some(l)) if !l.is_null() => {
            spec.insert("ephemeralContainers".into(), l.clone());
        }
        (Some(spec), _) => {
            spec.remove("ephemeralContainers");
        }
        (None, _) => {}
    }
    pod
}

/// What the caller pinned: the resourceVersion in the body, if any.
fn pinned_rev(obj: &Value) -> ApiResult<Option<u64>> {
    match object::meta_str(obj, "resourceVersion") {
        "" => Ok(None),
        s => s
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}"))),
    }
}

/// A computed new object and how it was asked for.
struct Change {
    new: Value,
    sub: Sub,
    dry_run: bool,
    origin: Origin,
}

/// The new object a change makes of `old`, owned fields carried over, defaulted, validated and
/// checked against the kind's schema.
fn prepare(t: &Target, old: &Value, change: Change) -> ApiResult<Value> {
    let mut new = change.new;
    merge_owned(t, old, &mut new, change.sub)?;
    if t.res.kind == "Service" && matches!(change.sub, Sub::Main) {
        keelson_apiserver_registry::service_update::drop_type_dependent_fields(&mut new, old);
    }
    keelson_apiserver_registry::apply_defaults(t.res.kind, &mut new);
    super::custom::admit(t.res, &mut new, Some(old))?;
    if t.res.kind == "CustomResourceDefinition" {
        super::custom::definition_status(&mut new);
    }
    if t.res.tracks_generation() {
        let mut generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        if object::spec_part(&new) != object::spec_part(old) {
            generation = generation.saturating_add(1);
        }
        meta_mut(&mut new).insert("generation".into(), json!(generation));
    } else {
        meta_mut(&mut new).remove("generation");
    }
    let causes = match change.sub {
        Sub::EphemeralContainers => {
            keelson_apiserver_registry::validate_ephemeral_containers(&new, old)
        }
        _ => keelson_apiserver_registry::validate(t.res.kind, &new, Some(old)),
    };
    if !causes.is_empty() {
        return Err(ApiError::invalid(t.res.kind, t.res.group, &t.name, &causes));
    }
    admit(t.res, &new, change.origin)?;
    Ok(new)
}

/// Validates and commits a change over `old` (the CPU-bound part off the async workers);
/// returns Ok(None) on a conflict the caller may retry.
async fn commit(api: &Api, t: &Target, old: &Entry, change: Change) -> ApiResult<Option<Entry>> {
    let dry_run = change.dry_run;
    let (target, prev) = (t.clone(), old.value());
    let size = limits::encoded_len(&change.new).saturating_add(old.json.len());
    let mut new = off_workers_if_large(size, move || prepare(&target, &prev, change)).await?;
    if object::same_content(&new, &old.obj) {
        return Ok(Some(old.clone()));
    }
    super::podsecurity::enforce_update(api, t.res, &old.obj, &new)?;
    // An object being deleted goes once its last finalizer is removed.
    let finished = object::is_deleting(&new)
        && object::finalizers(&new) == 0
        && new
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0;
    let reservation = if finished {
        Reservation::release_all(&old.obj)
    } else {
        service_allocation::allocate(api, t.res, Some(&old.obj), &mut new, dry_run).await?
    };
    if dry_run {
        return Ok(Some(Entry::new(old.rev, new)));
    }
    let w = Write {
        key: t.key(),
        value: if finished { None } else { Some(new) },
        precondition: Precondition::Rev(old.rev),
    };
    match api.store.write(w).await {
        Ok(e) => {
            reservation.commit(&api.store).await;
            if finished {
                // Owners waiting in the foreground for this dependent may go now.
                super::delete::propagation::removed(api, &old.obj).await;
            }
            Ok(Some(e))
        }
        Err(StoreError::Conflict { .. }) => {
            reservation.rollback(&api.store).await;
            Ok(None)
        }
        Err(e) => {
            reservation.rollback(&api.store).await;
            Err(store_error(t, e))
        }
    }
}

/// Kinds that a PUT may create, as upstream allows.
fn create_on_update(kind: &str) -> bool {
    matches!(kind, "Endpoints" | "Event" | "Lease")
}

pub async fn update(
    api: &Api,
    t: &Target,
    body: Value,
    sub: Sub,
    dry_run: bool,
) -> ApiResult<Entry> {
    let pinned = pinned_rev(&body)?;
    for _ in 0..MAX_RETRIES {
        let old = match api.store.get(&t.key()) {
            Some(e) => e,
            None if sub == Sub::Main && create_on_update(t.res.kind) => {
                return create(api, t.res, &t.namespace, body, dry_run).await;
            }
            None => return Err(t.not_found()),
        };
        if pinned.is_some_and(|r| r != old.rev) {
            return Err(ApiError::conflict(t.res.group, t.res.plural, &t.name));
        }
        let change = Change {
            new: body.clone(),
            sub,
            dry_run,
            origin: Origin::Body,
        };
        if let Some(e) = commit(api, t, &old, change).await? {
            return Ok(e);
        }
        if pinned.is_some() {
            return Err(ApiError::conflict(t.res.group, t.res.plural, &t.name));
        }
    }
    Err(ApiError::conflict(t.res.group, t.res.plural, &t.name))
}

pub(super) fn patch_err(e: patch::PatchError) -> ApiError {
    let code = e.status_code();
    let reason = match code {
        400 => "BadRequest",
        413 => "RequestEntityTooLarge",
        _ => "Invalid",
    };
    ApiError::new(code, reason, format!("the patch could not be applied: {e}"))
}

/// One patch applied to the stored object.
fn apply(kind: PatchType, old: &Value, body: &Value, res_kind: &str) -> ApiResult<Value> {
    match kind {
        PatchType::Json => patch::json_patch(old, body),
        PatchType::Merge => Ok(patch::merge_patch(old, body)),
        PatchType::Strategic => patch::strategic_merge_patch(old, body, res_kind),
        PatchType::Apply => patch::apply_patch(Some(old), body, res_kind),
    }
    .map_err(patch_err)
}

pub async fn patch(
    api: &Api,
    t: &Target,
    kind: PatchType,
    body: Value,
    sub: Sub,
    dry_run: bool,
    fields: &FieldCheck,
) -> ApiResult<Entry> {
    let body = Arc::new(body);
    for _ in 0..MAX_RETRIES {
        let old = match api.store.get(&t.key()) {
            Some(e) => e,
            None if kind == PatchType::Apply && sub == Sub::Main => {
                let mut obj = patch::apply_patch(None, &body, t.res.kind).map_err(patch_err)?;
                fields.patched(&mut obj)?;
                meta_mut(&mut obj).insert("name".into(), json!(t.name));
                match create(api, t.res, &t.namespace, obj, dry_run).await {
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    other => return other,
                }
            }
            None => return Err(t.not_found()),
        };
        let (prev, body, res_kind) = (old.value(), body.clone(), t.res.kind);
        // A JSON patch's work is not bounded by the sizes going in (copy grows the object).
        let size = match kind {
            PatchType::Json => usize::MAX,
            _ => limits::encoded_len(&body).saturating_add(old.json.len()),
        };
        let mut new =
            off_workers_if_large(size, move || apply(kind, &prev, &body, res_kind)).await?;
        fields.patched(&mut new)?;
        let pinned = pinned_rev(&new)?;
        if pinned.is_some_and(|r| r != old.rev) {
            return Err(ApiError::conflict(t.res.group, t.res.plural, &t.name));
        }
        let change = Change {
            new,
            sub,
            dry_run,
            origin: Origin::Patch,
        };
        if let Some(e) = commit(api, t, &old, change).await? {
            return Ok(e);
        }
    }
    Err(ApiError::conflict(t.res.group, t.res.plural, &t.name))
}
