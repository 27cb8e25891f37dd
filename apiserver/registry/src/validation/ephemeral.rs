//! Ephemeral containers (validateEphemeralContainers, ValidatePodEphemeralContainersUpdate):
//! added to a running Pod only through pods/ephemeralcontainers, never changed or removed, and
//! never relied on for the pod's work, so probes, ports, resources and the like are refused.

use super::container::{container, PodFacts, Role};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use keelson_apimachinery::well_known::MIRROR_POD_ANNOTATION;
use serde_json::{json, Value};
use std::collections::HashSet;

const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";

/// The fields of EphemeralContainerCommon outside upstream's allowedEphemeralContainerFields,
/// in the struct's order (the order of upstream's causes).
const REFUSED_FIELDS: &[&str] = &[
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// The rules of `spec.ephemeralContainers` in any pod spec. `seen` holds the names of the
/// containers and init containers; an ephemeral container's name must differ from all of
/// them and from the other ephemeral containers.
pub(crate) fn ephemeral_containers(
    spec: &Value,
    path: &Path,
    pod: &PodFacts,
    seen: &mut HashSet<String>,
    out: &mut Vec<Cause>,
) {
    let others: HashSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| items(spec, k))
        .map(|c| str_at(c, "name").to_string())
        .collect();
    for (i, c) in items(spec, "ephemeralContainers").iter().enumerate() {
        let p = path.child("ephemeralContainers").index(i);
        container(c, &p, Role::Ephemeral, pod, seen, out);
        let target = str_at(c, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            out.push(Cause::not_found(
                p.child("targetContainerName"),
                &json!(target),
            ));
        }
        for key in REFUSED_FIELDS {
            if is_set(c, key) {
                out.push(Cause::forbidden(p.child(key), NOT_FOR_EPHEMERAL));
            }
        }
        // A subPath is a bind mount kept until the pod ends: it would outlive the debugging.
        for (j, m) in items(c, "volumeMounts").iter().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if !str_at(m, key).is_empty() {
                    let at = p.child("volumeMounts").index(j).child(key);
                    out.push(Cause::forbidden(at, NOT_FOR_EPHEMERAL));
                }
            }
        }
    }
}

/// Whether a field differs from its Go zero value: `resources` (a struct) when one of its
/// members is set, the pointers and lists when present at all.
fn is_set(c: &Value, key: &str) -> bool {
    match c.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) if key == "resources" => m.values().any(|v| !v.is_null()),
        Some(_) => true,
    }
}

/// ValidatePodCreate: ephemeral containers come only through the subresource.
pub(crate) fn on_create(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    if !items(spec, "ephemeralContainers").is_empty() {
        let p = path.child("ephemeralContainers");
        out.push(Cause::forbidden(p, "cannot be set on create"));
    }
}

/// ValidatePodTemplateSpec: a workload's pods cannot start with ephemeral containers.
pub(crate) fn in_template(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    if !items(spec, "ephemeralContainers").is_empty() {
        let p = path.child("ephemeralContainers");
        out.push(Cause::forbidden(
            p,
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// The part of ValidatePodEphemeralContainersUpdate after the spec's own rules: a static pod
/// takes none, and each existing ephemeral container stays as it is.
pub(crate) fn update(new: &Value, old: &Value, out: &mut Vec<Cause>) {
    let mirror = old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some();
    if mirror {
        let msg = "static pods do not support ephemeral containers";
        *out = vec![Cause::forbidden("", msg)];
        return;
    }
    let path = Path::root().child("spec").child("ephemeralContainers");
    let new_list = new.pointer("/spec/ephemeralContainers");
    let old_list = old.pointer("/spec/ephemeralContainers");
    let by_name = |name: &str| {
        let list = new_list.and_then(Value::as_array).map(Vec::as_slice);
        // Upstream indexes the new list by name, so the last of a repeated name counts.
        list.unwrap_or(&[])
            .iter()
            .rev()
            .find(|c| str_at(c, "name") == name)
    };
    for old_c in old_list.and_then(Value::as_array).into_iter().flatten() {
        let name = str_at(old_c, "name");
        let msg = match by_name(name) {
            None => format!("existing ephemeral containers {name:?} may not be removed\n"),
            Some(new_c) if new_c != old_c => format!(
                "existing ephemeral containers {name:?} may not be changed\n{}",
                diff(old_c, new_c)
            ),
            Some(_) => continue,
        };
        out.push(Cause::forbidden(&path, &msg));
    }
}

/// The fields that differ between two containers, one `-`/`+` pair each (upstream shows a
/// cmp.Diff of its Go structs; this is the same information in the wire form).
fn diff(old: &Value, new: &Value) -> String {
    let empty = serde_json::Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let keys: Vec<&String> = o
        .keys()
        .chain(n.keys().filter(|k| !o.contains_key(*k)))
        .collect();
    let mut text = String::new();
    for k in keys {
        let (a, b) = (o.get(k), n.get(k));
        if a == b {
            continue;
        }
        if let Some(a) = a {
            text.push_str(&format!("- {k}: {a}\n"));
        }
        if let Some(b) = b {
            text.push_str(&format!("+ {k}: {b}\n"));
        }
    }
    text
}
