//! pods/binding, pods/eviction and the scale subresource of Deployments and ReplicaSets.

use super::delete::{delete, DeleteOptions};
use super::update::{patch, patch_err, update};
use super::Sub;
use super::{Api, Target};
use crate::negotiate::PatchType;
use crate::object;
use crate::status::{ApiError, ApiResult};
use crate::store::Entry;
use keelson_apiserver_registry::custom::ScalePaths;
use keelson_apiserver_registry::schema;
use serde_json::{json, Value};

/// A subresource body that its typed struct cannot decode is 400, as upstream.
fn undecodable(kind: &str, decode: schema::Decode, body: &Value) -> ApiResult<()> {
    decode(body).map_err(|c| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {}: {}",
            c.field, c.message
        ))
    })
}

/// POST pods/{name}/binding: sets spec.nodeName once, and the PodScheduled condition. With
/// `dry_run`, every check runs and nothing is written.
pub async fn bind(api: &Api, t: &Target, binding: &Value, dry_run: bool) -> ApiResult<Entry> {
    undecodable("Binding", schema::BINDING, binding)?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            &t.name,
            &[keelson_apiserver_registry::Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value".into(),
                field: "target.name".into(),
            }],
        ));
    }
    let cur = api.get_entry(t)?;
    if let Some(uid) = binding.pointer("/metadata/uid").and_then(Value::as_str) {
        if uid != object::meta_str(&cur.obj, "uid") {
            return Err(ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on pods/binding \"{}\": precondition failed: UID does not match", t.name)));
        }
    }
    let assigned = cur
        .obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !assigned.is_empty() {
        return Err(ApiError::new(409, "Conflict", format!(
            "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is already assigned to node \"{assigned}\"",
            t.name, t.name
        )));
    }
    if object::is_deleting(&cur.obj) {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "pod {} is being deleted, cannot be assigned to a host",
                t.name
            ),
        ));
    }
    let mut pod = (*cur.obj).clone();
    // A Pod stored before the schema checks may have a malformed spec or status: refused or
    // replaced, never indexed into (serde_json panics on writing a field of a non-object).
    match pod.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) => spec.insert("nodeName".into(), json!(node)),
        None => {
            let cause = keelson_apiserver_registry::Cause::required("spec", "");
            return Err(ApiError::invalid("Pod", "", &t.name, &[cause]));
        }
    };
    let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": object::now_rfc3339()});
    let mut conds: Vec<Value> = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter(|c| c.get("type").is_none_or(|t| t != "PodScheduled"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    conds.push(cond);
    // A status that is not an object (stored before the schema checks) is replaced.
    object::set_path(&mut pod, &["status", "conditions"], json!(conds));
    update(api, t, pod, Sub::Binding, dry_run).await
}

/// POST pods/{name}/eviction (policy/v1 Eviction): deletes the Pod with the eviction's
/// deleteOptions, as a DELETE would, once its PodDisruptionBudget (if any) allows it (429
/// TooManyRequests otherwise, which `kubectl drain` waits on).
pub async fn evict(api: &Api, t: &Target, eviction: &Value, dry_run: bool) -> ApiResult<()> {
    undecodable("Eviction", schema::EVICTION, eviction)?;
    let named = object::name(eviction);
    if !named.is_empty() && named != t.name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let pod = api.get_entry(t)?;
    let mut opts: DeleteOptions = match eviction.get("deleteOptions") {
        Some(o) if !o.is_null() => serde_json::from_value(o.clone())
            .map_err(|e| ApiError::bad_request(format!("invalid deleteOptions: {e}")))?,
        _ => DeleteOptions::default(),
    };
    if dry_run && opts.dry_run.is_none() {
        opts.dry_run = Some(vec!["All".into()]);
    }
    if !super::disruption::can_ignore(&pod.obj) {
        let dry = opts.dry_run.as_ref().is_some_and(|d| !d.is_empty());
        super::disruption::check_and_record(api, &t.namespace, &pod.obj, dry).await?;
    }
    delete(api, t, &opts).await.map(|_| ())
}

/// Where a kind keeps what its Scale shows: fixed for Deployments, ReplicaSets and
/// StatefulSets, its definition's subresources.scale for a custom resource.
fn scale_paths(t: &Target) -> ScalePaths {
    keelson_apiserver_registry::custom::definition(t.res)
        .and_then(|d| d.version(t.res.version).and_then(|v| v.scale.clone()))
        .unwrap_or_else(|| ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        })
}

/// ".spec.replicas" as a JSON pointer.
fn pointer(path: &str) -> String {
    path.replace('.', "/")
}

/// The autoscaling/v1 Scale view of a Deployment, ReplicaSet or custom resource.
fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let m = |field: &str| object::meta(obj).and_then(|m| m.get(field));
    let selector = match &paths.label_selector {
        Some(p) => obj
            .pointer(&pointer(p))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        None => obj
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
    };
    let default_replicas = i64::from(paths.label_selector.is_none());
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m("name"), "namespace": m("namespace"), "uid": m("uid"),
            "resourceVersion": m("resourceVersion"), "creationTimestamp": m("creationTimestamp"),
        },
        "spec": { "replicas": int_at(obj, &pointer(&paths.spec_replicas)).unwrap_or(default_replicas) },
        "status": { "replicas": int_at(obj, &pointer(&paths.status_replicas)).unwrap_or(0), "selector": selector },
    })
}

fn int_at(obj: &Value, pointer: &str) -> Option<i64> {
    obj.pointer(pointer).and_then(Value::as_i64)
}

pub fn get_scale(api: &Api, t: &Target) -> ApiResult<Value> {
    Ok(scale_of(&api.get_entry(t)?.obj, &scale_paths(t)))
}

/// PUT or PATCH of a Scale: computes the wanted replicas on the Scale view, then writes them
/// to the object's spec.replicas.
pub async fn update_scale(
    api: &Api,
    t: &Target,
    body: &Value,
    kind: Option<PatchType>,
    dry_run: bool,
) -> ApiResult<Value> {
    let cur = api.get_entry(t)?;
    let paths = scale_paths(t);
    let scale = scale_of(&cur.obj, &paths);
    let wanted = match kind {
        None => {
            undecodable("Scale", schema::SCALE, body)?;
            body.clone()
        }
        Some(PatchType::Json) => {
            keelson_apimachinery::patch::json_patch(&scale, body).map_err(patch_err)?
        }
        Some(_) => keelson_apimachinery::patch::merge_patch(&scale, body),
    };
    let replicas = int_at(&wanted, "/spec/replicas").ok_or_else(|| {
        ApiError::invalid(
            "Scale",
            "autoscaling",
            &t.name,
            &[keelson_apiserver_registry::Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value".into(),
                field: "spec.replicas".into(),
            }],
        )
    })?;
    if replicas < 0 {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            &t.name,
            &[keelson_apiserver_registry::Cause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                field: "spec.replicas".into(),
            }],
        ));
    }
    let rv = object::meta_str(&wanted, "resourceVersion");
    let mut p = json!({});
    let at: Vec<&str> = paths
        .spec_replicas
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    object::set_path(&mut p, &at, json!(replicas));
    if kind.is_none() && !rv.is_empty() {
        object::set_path(&mut p, &["metadata", "resourceVersion"], json!(rv));
    }
    // The Scale body was checked as a Scale; the patch it makes has only known fields.
    let fields = crate::openapi::FieldCheck::new(t.res, crate::openapi::Directive::Ignore);
    let e = patch(api, t, PatchType::Merge, p, Sub::Main, dry_run, &fields).await?;
    Ok(scale_of(&e.obj, &paths))
}
