//! StatefulSet and ControllerRevision rules (apps/validation ValidateStatefulSet,
//! ValidateControllerRevision), with upstream's paths and messages.

use super::apps::{int_or_percent, pod_template};
use super::field_checks::{immutable, name_check, non_negative};
use crate::cause::Cause;
use crate::json::{at, items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

/// The spec fields an update may change; any other change is forbidden, as upstream.
const UPDATABLE: [&str; 7] = [
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

pub(crate) fn stateful_set(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        non_negative(spec, key, &path, out);
    }
    if let Some(ordinals) = spec.get("ordinals").filter(|o| !o.is_null()) {
        non_negative(ordinals, "start", &path.child("ordinals"), out);
    }
    match str_at(spec, "podManagementPolicy") {
        "" => out.push(Cause::required(path.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => out.push(Cause::invalid(
            path.child("podManagementPolicy"),
            &json!(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    update_strategy(spec, &path.child("updateStrategy"), out);
    retention_policy(spec, &path, out);
    claim_templates(spec, &path.child("volumeClaimTemplates"), out);
    pod_template(&with_claim_volumes(spec), "statefulset", &path, out);
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        if fixed_part(spec) != fixed_part(old_spec) {
            let msg = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
            out.push(Cause::forbidden(&path, msg));
        }
    }
}

/// The spec without the fields an update may change.
fn fixed_part(spec: &Value) -> Value {
    let mut fixed = spec.clone();
    if let Some(map) = fixed.as_object_mut() {
        for key in UPDATABLE {
            map.remove(key);
        }
    }
    fixed
}

/// The spec with each claim template's volume in the pod template, as the pods get it, so
/// that containers mounting a claim pass the pod's volume-mount checks.
fn with_claim_volumes(spec: &Value) -> Value {
    let mut spec = spec.clone();
    let names: Vec<String> = items(&spec, "volumeClaimTemplates")
        .iter()
        .filter_map(|t| at(t, &["metadata", "name"]).and_then(Value::as_str))
        .map(String::from)
        .collect();
    let volumes = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
        .map(|pod| pod.entry("volumes").or_insert_with(|| json!([])));
    if let Some(Value::Array(list)) = volumes {
        for name in names {
            list.retain(|v| str_at(v, "name") != name);
            list.push(json!({ "name": name, "persistentVolumeClaim": { "claimName": name } }));
        }
    }
    spec
}

fn update_strategy(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let empty = json!({});
    let strategy = spec.get("updateStrategy").unwrap_or(&empty);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match (str_at(strategy, "type"), rolling) {
        ("", _) => out.push(Cause::required(path, "")),
        ("OnDelete", Some(r)) => out.push(Cause::invalid(
            path.child("rollingUpdate"),
            r,
            "only allowed for updateStrategy 'RollingUpdate'",
        )),
        ("OnDelete", None) | ("RollingUpdate", None) => {}
        ("RollingUpdate", Some(r)) => {
            let rpath = path.child("rollingUpdate");
            non_negative(r, "partition", &rpath, out);
            if let Some(max) = r.get("maxUnavailable").filter(|m| !m.is_null()) {
                let mpath = rpath.child("maxUnavailable");
                if int_or_percent(max, &mpath, out) == Some(0) {
                    out.push(Cause::invalid(&mpath, max, "cannot be 0"));
                }
            }
        }
        _ => out.push(Cause::invalid(
            path,
            strategy,
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
}

fn retention_policy(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let Some(policy) = spec
        .get("persistentVolumeClaimRetentionPolicy")
        .filter(|p| !p.is_null())
    else {
        return;
    };
    let ppath = path.child("persistentVolumeClaimRetentionPolicy");
    for key in ["whenDeleted", "whenScaled"] {
        let value = str_at(policy, key);
        if !matches!(value, "Retain" | "Delete") {
            out.push(Cause::not_supported(
                ppath.child(key),
                &json!(value),
                &["Retain", "Delete"],
            ));
        }
    }
}

/// Each template names its claims `<template>-<set>-<ordinal>`: its name must be a DNS-1123
/// subdomain, and names may not repeat.
fn claim_templates(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let mut seen = Vec::new();
    for (i, template) in items(spec, "volumeClaimTemplates").iter().enumerate() {
        let npath = path.index(i).child("metadata").child("name");
        let name = at(template, &["metadata", "name"])
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.is_empty() {
            out.push(Cause::required(&npath, "name or generateName is required"));
            continue;
        }
        name_check(names::dns1123_subdomain(name), &npath, name, out);
        if seen.contains(&name) {
            out.push(Cause::duplicate(&npath, &json!(name)));
        }
        seen.push(name);
    }
}

/// A ControllerRevision's data never changes; its revision number may (it is renumbered when
/// a set returns to it) but is never negative.
pub(crate) fn controller_revision(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    non_negative(obj, "revision", &Path::root(), out);
    if let Some(old) = old {
        let new_data = obj.get("data").unwrap_or(&Value::Null);
        let old_data = old.get("data").unwrap_or(&Value::Null);
        immutable(new_data, old_data, &Path::root().child("data"), out);
    }
}

#[cfg(test)]
mod tests;
