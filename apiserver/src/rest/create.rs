//! POST: server-owned metadata, generateName, defaults, validation, initial status, Service
//! allocations, then a write that fails if the name is taken.

use super::admission::{self, Admission};
use super::{initial_status, service_allocation, store_error, Api, Target};
use crate::object::{self, meta_mut};
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, Precondition, Write};
use keelson_apiserver_registry::limits::{self, MAX_DEPTH, MAX_OBJECT_BYTES};
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::time::Duration;

/// How long the CPU-bound part of one write (patching, defaulting, validation) may run.
const WORK_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a write's CPU-bound work on the blocking pool, so that the async workers keep serving
/// `/readyz` and watches while a large patch applies; past `WORK_TIMEOUT` the request is 504
/// (the work finishes in the background, and its result is dropped unstored).
pub(super) async fn off_workers<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    match tokio::time::timeout(WORK_TIMEOUT, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(ApiError::internal(format!("the request failed: {e}"))),
        Err(_) => Err(ApiError::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )),
    }
}

/// Work on objects up to this size runs inline: it takes microseconds, and the hop to the
/// blocking pool would cost more than the work itself (a fifth of the write throughput with 64
/// writers, measured by `scripts/bench apiserver`).
const INLINE_WORK_BYTES: usize = 64 * 1024;

/// `off_workers` for work over `size` bytes of JSON; smaller work runs here and now.
pub(super) async fn off_workers_if_large<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    if size <= INLINE_WORK_BYTES {
        return work();
    }
    off_workers(work).await
}

/// Where a checked object came from: upstream answers a body it cannot decode with 400
/// BadRequest and a patched object that does not decode with 422 Invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Body,
    Patch,
}

/// The checks every object passes before it is stored, after defaulting and validation: a depth
/// the store can load again, etcd's size limit, and a decode into the kind's typed struct so
/// every typed client can still read it.
pub(super) fn admit(res: &Resource, obj: &Value, origin: Origin) -> ApiResult<()> {
    let name = object::name(obj);
    if let Some(at) = limits::too_deep(obj, MAX_DEPTH) {
        let detail = format!("must not be nested more than {MAX_DEPTH} levels deep");
        return Err(ApiError::invalid(
            res.kind,
            res.group,
            name,
            &[Cause::forbidden(at, &detail)],
        ));
    }
    let size = limits::encoded_len(obj);
    if size > MAX_OBJECT_BYTES {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: the object is {size} bytes, limit is {MAX_OBJECT_BYTES}"
            ),
        ));
    }
    let Err(cause) = (res.decode)(obj) else {
        return Ok(());
    };
    let mut e = ApiError::invalid(res.kind, res.group, name, std::slice::from_ref(&cause));
    if origin == Origin::Body {
        let (kind, version) = (res.kind, res.version);
        e.code = 400;
        e.reason = "BadRequest";
        e.message = format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {}: {}",
            cause.field, cause.message
        );
    }
    Err(e)
}

/// Checks that a body's apiVersion and kind (when given) name this resource, then sets them.
pub(super) fn check_type(res: &Resource, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let want = res.api_version();
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str) {
        if v != want {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str) {
        if k != res.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
    }
    obj["apiVersion"] = json!(want);
    obj["kind"] = json!(res.kind);
    Ok(())
}

/// Sets the namespace from the URL; a different one in the body is an error, as upstream.
pub(super) fn check_namespace_field(res: &Resource, ns: &str, obj: &mut Value) -> ApiResult<()> {
    let m = meta_mut(obj);
    if !res.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    match m.get("namespace").and_then(Value::as_str) {
        Some(given) if !given.is_empty() && given != ns => Err(ApiError::bad_request(format!(
            "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
        ))),
        _ => {
            m.insert("namespace".into(), json!(ns));
            Ok(())
        }
    }
}

/// What the server sets on a new object whatever the client sent: the name from generateName,
/// uid, creationTimestamp and generation (for kinds that track it); no resourceVersion or
/// deletion marks.
fn server_owned_metadata(res: &Resource, obj: &mut Value) {
    let m = meta_mut(obj);
    let unnamed = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty();
    let prefix = m.get("generateName").and_then(Value::as_str).unwrap_or("");
    if unnamed && !prefix.is_empty() {
        let generated = format!("{prefix}{}", object::random_suffix());
        m.insert("name".into(), json!(generated));
    }
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ] {
        m.remove(k);
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(object::now_rfc3339()));
    if res.tracks_generation() {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
}

/// Everything a create computes before touching the store: type, namespace, server-owned
/// metadata, initial status, defaults, validation and the schema check.
fn prepare(res: &Resource, ns: &str, mut obj: Value, admission: Admission) -> ApiResult<Value> {
    check_type(res, &mut obj)?;
    check_namespace_field(res, ns, &mut obj)?;
    server_owned_metadata(res, &mut obj);
    initial_status::reset_status_on_create(res, &mut obj);
    keelson_apiserver_registry::apply_defaults(res.kind, &mut obj);
    super::custom::admit(res, &mut obj, None)?;
    admission.on_create(res.kind, &mut obj);
    initial_status::fill_on_create(res, &mut obj);
    let causes = keelson_apiserver_registry::validate(res.kind, &obj, None);
    super::refuse_invalid(res, &obj, &causes)?;
    admit(res, &obj, Origin::Body)?;
    Ok(obj)
}

/// The admission plugins that read other objects (LimitRanger, ServiceAccount, Priority),
/// in upstream's order; a pod they changed is validated again, as upstream validates after
/// mutating admission.
fn admit_reading_others(api: &Api, res: &Resource, ns: &str, obj: &mut Value) -> ApiResult<()> {
    match res.kind {
        "Pod" => {
            let limited = admission::limit_ranger::admit_pod(api, ns, obj)?;
            super::service_account_admission::admit_pod(api, ns, obj)?;
            admission::priority::admit_pod(api, obj)?;
            if limited {
                // The QoS class follows the resources the defaults gave.
                initial_status::fill_on_create(res, obj);
                let causes = keelson_apiserver_registry::validate(res.kind, obj, None);
                super::refuse_invalid(res, obj, &causes)?;
            }
        }
        "PersistentVolumeClaim" => admission::limit_ranger::admit_claim(api, ns, obj)?,
        "PriorityClass" => admission::priority::admit_class(api, obj)?,
        _ => {}
    }
    Ok(())
}

pub async fn create(
    api: &Api,
    res: &'static Resource,
    ns: &str,
    obj: Value,
    dry_run: bool,
) -> ApiResult<Entry> {
    let owned_ns = ns.to_string();
    let size = limits::encoded_len(&obj);
    let requested_name = object::name(&obj).to_string();
    let admission = api.admission;
    let mut obj =
        off_workers_if_large(size, move || prepare(res, &owned_ns, obj, admission)).await?;
    if res.namespaced {
        api.check_namespace(ns, true)?;
    }
    admit_reading_others(api, res, ns, &mut obj)?;
    super::podsecurity::enforce_create(api, res, ns, &requested_name, &obj)?;
    let name = object::name(&obj).to_string();
    let target = Target {
        res,
        namespace: ns.to_string(),
        name,
    };
    if api.store.get(&target.key()).is_some() {
        return Err(ApiError::already_exists(
            res.group,
            res.plural,
            &target.name,
        ));
    }
    // Last, as upstream's validating ResourceQuota: nothing after it refuses but the store.
    // Boxed: the charge is an update of the quota, and an update may create.
    Box::pin(admission::quota::charge(api, res, ns, &obj, dry_run)).await?;
    let reservation = service_allocation::allocate(api, res, None, &mut obj, dry_run).await?;
    if dry_run {
        return Ok(Entry::new(0, obj));
    }
    let w = Write {
        key: target.key(),
        value: Some(obj),
        precondition: Precondition::MustNotExist,
    };
    match api.store.write(w).await {
        Ok(e) => {
            reservation.commit(&api.store).await;
            Ok(e)
        }
        Err(e) => {
            reservation.rollback(&api.store).await;
            Err(store_error(&target, e))
        }
    }
}
