//! Pod and pod spec rules (ValidatePodSpec, ValidatePodUpdate).

use super::container::{container, PodFacts, Role};
use super::ephemeral;
use super::field_checks::{int_field, labels, name_check, one_of};
use crate::cause::Cause;
use crate::json::{bool_at, items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use keelson_apimachinery::volumes::POD_VOLUME_SOURCES;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub(crate) fn pod(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec_path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    pod_spec(spec, &spec_path, out);
    match old {
        None => ephemeral::on_create(spec, &spec_path, out),
        Some(old) => {
            if let Some(old_spec) = old.get("spec") {
                pod_update(spec, old_spec, &spec_path, out);
            }
        }
    }
}

/// A write through pods/ephemeralcontainers: the spec's rules and the ephemeral containers'
/// update rules, without pod_update (only the ephemeral list can differ from `old`).
pub(crate) fn ephemeral_update(obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    pod_spec(spec, &Path::root().child("spec"), out);
    ephemeral::update(obj, old, out);
}

pub(crate) fn pod_spec(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let volumes = volumes(spec, path, out);
    let pod = PodFacts {
        volumes: &volumes,
        host_network: bool_at(spec, "hostNetwork"),
        grace_period: spec
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30),
    };
    let mut seen = HashSet::new();
    if items(spec, "containers").is_empty() {
        out.push(Cause::required(path.child("containers"), ""));
    }
    for (key, role) in [
        ("initContainers", Role::Init),
        ("containers", Role::Regular),
    ] {
        for (i, c) in items(spec, key).iter().enumerate() {
            let p = path.child(key).index(i);
            container(c, &p, role, &pod, &mut seen, out);
        }
    }
    ephemeral::ephemeral_containers(spec, path, &pod, &mut seen, out);
    one_of(
        spec,
        "restartPolicy",
        &["Always", "OnFailure", "Never"],
        true,
        path,
        out,
    );
    let dns = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
    one_of(spec, "dnsPolicy", &dns, true, path, out);
    if let Some(n) = int_field(spec, "activeDeadlineSeconds", path, out) {
        if !(1..=i64::from(i32::MAX)).contains(&n) {
            let msg = "must be between 1 and 2147483647, inclusive";
            out.push(Cause::invalid(
                path.child("activeDeadlineSeconds"),
                &json!(n),
                msg,
            ));
        }
    }
    int_field(spec, "terminationGracePeriodSeconds", path, out);
    for key in ["nodeName", "serviceAccountName"] {
        let v = str_at(spec, key);
        if !v.is_empty() {
            name_check(names::dns1123_subdomain(v), &path.child(key), v, out);
        }
    }
    for key in ["hostname", "subdomain"] {
        let v = str_at(spec, key);
        if !v.is_empty() {
            name_check(names::dns1123_label(v), &path.child(key), v, out);
        }
    }
    labels(spec.get("nodeSelector"), &path.child("nodeSelector"), out);
    tolerations(spec, &path.child("tolerations"), out);
}

/// Volume names (unique DNS labels) and sources; returns the names for volumeMounts.
fn volumes(spec: &Value, path: &Path, out: &mut Vec<Cause>) -> HashSet<String> {
    let mut names_seen = HashSet::new();
    for (i, v) in items(spec, "volumes").iter().enumerate() {
        let p = path.child("volumes").index(i);
        let name = str_at(v, "name");
        if name.is_empty() {
            out.push(Cause::required(p.child("name"), ""));
        } else {
            name_check(names::dns1123_label(name), &p.child("name"), name, out);
            if !names_seen.insert(name.to_string()) {
                out.push(Cause::duplicate(p.child("name"), &json!(name)));
            }
        }
        let sources: Vec<&&str> = POD_VOLUME_SOURCES
            .iter()
            .filter(|k| v.get(**k).is_some())
            .collect();
        match sources.as_slice() {
            [] => out.push(Cause::required(&p, "must specify a volume type")),
            [_, second, ..] => out.push(Cause::forbidden(
                p.child(second),
                "may not specify more than 1 volume type",
            )),
            [_] => {}
        }
        for (source, key) in [
            ("hostPath", "path"),
            ("secret", "secretName"),
            ("configMap", "name"),
            ("persistentVolumeClaim", "claimName"),
        ] {
            if let Some(src) = v.get(source) {
                if str_at(src, key).is_empty() {
                    out.push(Cause::required(p.child(source).child(key), ""));
                }
            }
        }
        host_path_and_empty_dir(v, &p, out);
    }
    names_seen
}

const HOST_PATH_TYPES: &[&str] = &[
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];

/// Upstream's validateHostPathVolumeSource and the emptyDir medium and size limit.
fn host_path_and_empty_dir(v: &Value, p: &Path, out: &mut Vec<Cause>) {
    if let Some(hp) = v.get("hostPath").filter(|s| s.is_object()) {
        let path = str_at(hp, "path");
        if let Some(msg) = names::no_backsteps(path) {
            out.push(Cause::invalid(
                p.child("hostPath").child("path"),
                &json!(path),
                &msg,
            ));
        }
        one_of(
            hp,
            "type",
            HOST_PATH_TYPES,
            false,
            &p.child("hostPath"),
            out,
        );
    }
    if let Some(ed) = v.get("emptyDir").filter(|s| s.is_object()) {
        let ep = p.child("emptyDir");
        let medium = str_at(ed, "medium");
        if !(medium.is_empty() || medium == "Memory" || medium.starts_with("HugePages")) {
            let supported = ["", "Memory", "HugePages"];
            out.push(Cause::not_supported(
                ep.child("medium"),
                &json!(medium),
                &supported,
            ));
        }
        if let Some(limit) = ed.get("sizeLimit").filter(|l| !l.is_null()) {
            if crate::quantity::parse_value(limit).is_none_or(|n| n < 0.0) {
                let msg = "must be a valid, non-negative quantity";
                out.push(Cause::invalid(ep.child("sizeLimit"), limit, msg));
            }
        }
    }
}

fn tolerations(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    for (i, t) in items(spec, "tolerations").iter().enumerate() {
        let p = path.index(i);
        let key = str_at(t, "key");
        let op = str_at(t, "operator");
        if !key.is_empty() {
            name_check(names::qualified_name(key), &p.child("key"), key, out);
        } else if op != "Exists" {
            let msg = "operator must be Exists when `key` is empty, which means \"match all values and all keys\"";
            out.push(Cause::invalid(p.child("operator"), &json!(op), msg));
        }
        match op {
            "" | "Equal" => {}
            "Exists" if !str_at(t, "value").is_empty() => {
                let msg = "value must be empty when `operator` is 'Exists'";
                out.push(Cause::invalid(p.child("operator"), &json!(op), msg));
            }
            "Exists" => {}
            _ => out.push(Cause::not_supported(
                p.child("operator"),
                &json!(op),
                &["Equal", "Exists"],
            )),
        }
        let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        one_of(t, "effect", &effects, false, &p, out);
        if t.get("tolerationSeconds").is_some_and(|v| !v.is_null())
            && str_at(t, "effect") != "NoExecute"
        {
            let msg = "effect must be 'NoExecute' when `tolerationSeconds` is set";
            out.push(Cause::invalid(
                p.child("effect"),
                &json!(str_at(t, "effect")),
                msg,
            ));
        }
    }
}

/// Sets `key` in `m` to what `old` has (or removes it), so allowed changes compare equal.
fn take_old(m: &mut Map<String, Value>, old: &Value, key: &str) {
    match old.get(key) {
        Some(v) => m.insert(key.to_string(), v.clone()),
        None => m.remove(key),
    };
}

/// Only images, activeDeadlineSeconds, added tolerations and a few more may change on a Pod.
fn pod_update(new: &Value, old: &Value, path: &Path, out: &mut Vec<Cause>) {
    let mut munged = new.clone();
    let Some(m) = munged.as_object_mut() else {
        return;
    };
    for key in ["containers", "initContainers"] {
        let old_list = items(old, key);
        if let Some(list) = m.get_mut(key).and_then(Value::as_array_mut) {
            if list.len() == old_list.len() {
                for (c, o) in list.iter_mut().zip(old_list) {
                    if let Some(c) = c.as_object_mut() {
                        take_old(c, o, "image");
                    }
                }
            }
        }
    }
    take_old(m, old, "activeDeadlineSeconds");
    // The server applies pods/binding as an update; upstream sets nodeName outside validation.
    if str_at(old, "nodeName").is_empty() {
        take_old(m, old, "nodeName");
    }
    let new_tolerations = items(new, "tolerations");
    if items(old, "tolerations")
        .iter()
        .all(|t| new_tolerations.contains(t))
    {
        take_old(m, old, "tolerations");
    }
    let old_grace = old
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let new_grace = new
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && new_grace == Some(1) {
        take_old(m, old, "terminationGracePeriodSeconds");
    }
    let old_gates = items(old, "schedulingGates");
    if items(new, "schedulingGates")
        .iter()
        .all(|g| old_gates.contains(g))
    {
        take_old(m, old, "schedulingGates");
    }
    if &munged != old {
        out.push(Cause::forbidden(path, POD_UPDATE_FORBIDDEN));
    }
}
