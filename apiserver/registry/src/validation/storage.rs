//! PersistentVolume, PersistentVolumeClaim and StorageClass rules, as upstream's
//! ValidatePersistentVolume, ValidatePersistentVolumeClaim(Update) and ValidateStorageClass
//! (the fields Keelson uses; other volume sources are accepted as stored).

use super::field_checks::{immutable, label_selector, one_of};
use crate::cause::Cause;
use crate::json::{at, items, str_at};
use crate::path::Path;
use keelson_apimachinery::volumes::PERSISTENT_VOLUME_SOURCES;
use serde_json::{json, Value};

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

fn access_modes(spec: &Value, path: &Path, detail: &str, out: &mut Vec<Cause>) {
    let modes = items(spec, "accessModes");
    let mp = path.child("accessModes");
    if modes.is_empty() {
        out.push(Cause::required(&mp, detail));
    }
    for m in modes {
        let mode = m.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&mode) {
            out.push(Cause::not_supported(&mp, m, ACCESS_MODES));
        }
    }
}

fn volume_mode(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    one_of(
        spec,
        "volumeMode",
        &["Block", "Filesystem"],
        false,
        path,
        out,
    );
}

pub(crate) fn persistent_volume(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    if at(spec, &["capacity", "storage"]).is_none() {
        out.push(Cause::required(path.child("capacity"), ""));
    }
    access_modes(spec, &path, "must specify at least 1 access mode", out);
    let policies = ["Delete", "Recycle", "Retain"];
    one_of(
        spec,
        "persistentVolumeReclaimPolicy",
        &policies,
        false,
        &path,
        out,
    );
    volume_mode(spec, &path, out);
    let named: Vec<&str> = PERSISTENT_VOLUME_SOURCES
        .iter()
        .copied()
        .filter(|s| spec.get(*s).is_some_and(|v| !v.is_null()))
        .collect();
    match named.as_slice() {
        [] => out.push(Cause::required(&path, "must specify a volume type")),
        [_] => {}
        [_, extra, ..] => out.push(Cause::forbidden(
            path.child(extra),
            "may not specify more than 1 volume type",
        )),
    }
    for source in ["hostPath", "local"] {
        if let Some(v) = spec.get(source).filter(|v| !v.is_null()) {
            if str_at(v, "path").is_empty() {
                out.push(Cause::required(path.child(source).child("path"), ""));
            }
        }
    }
    let affinity = at(spec, &["nodeAffinity", "required"]);
    if spec.get("local").is_some_and(|v| !v.is_null()) && affinity.is_none() {
        let detail = "Local volume requires node affinity";
        out.push(Cause::required(path.child("nodeAffinity"), detail));
    }
}

pub(crate) fn persistent_volume_claim(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    access_modes(spec, &path, "at least 1 access mode is required", out);
    if at(spec, &["resources", "requests", "storage"]).is_none() {
        out.push(Cause::required("spec.resources[storage]", ""));
    }
    if let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) {
        label_selector(sel, &path.child("selector"), out);
    }
    volume_mode(spec, &path, out);
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        if comparable(spec, old_spec) != comparable(old_spec, old_spec) {
            let detail = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";
            out.push(Cause::forbidden(&path, detail));
        }
    }
}

/// The claim's spec without what an update may change: the requests (expansion), the volume
/// name while none was set (binding), the class while none was set (the default class).
fn comparable(spec: &Value, old: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        if let Some(r) = m.get_mut("resources").and_then(Value::as_object_mut) {
            r.remove("requests");
        }
        if str_at(old, "volumeName").is_empty() {
            m.remove("volumeName");
        }
        if old.get("storageClassName").is_none_or(Value::is_null) {
            m.remove("storageClassName");
        }
        m.remove("volumeAttributesClassName");
    }
    s
}

pub(crate) fn storage_class(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let root = Path::root();
    if str_at(obj, "provisioner").is_empty() {
        out.push(Cause::required(root.child("provisioner"), ""));
    }
    one_of(
        obj,
        "reclaimPolicy",
        &["Delete", "Retain"],
        false,
        &root,
        out,
    );
    let modes = ["Immediate", "WaitForFirstConsumer"];
    one_of(obj, "volumeBindingMode", &modes, false, &root, out);
    let Some(old) = old else { return };
    for key in ["parameters", "provisioner", "reclaimPolicy"] {
        if obj.get(key) != old.get(key) {
            let detail = format!("updates to {key} are forbidden.");
            out.push(Cause::forbidden(root.child(key), &detail));
        }
    }
    let mode = |o: &Value| o.get("volumeBindingMode").cloned().unwrap_or(Value::Null);
    immutable(
        &mode(obj),
        &mode(old),
        &root.child("volumeBindingMode"),
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(causes: &[Cause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_volume_needs_capacity_modes_and_one_source() {
        let mut out = Vec::new();
        persistent_volume(&json!({"spec": {}}), &mut out);
        assert_eq!(
            messages(&out),
            [
                "spec.capacity: Required value",
                "spec.accessModes: Required value: must specify at least 1 access mode",
                "spec: Required value: must specify a volume type",
            ]
        );
        let mut out = Vec::new();
        let ok = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/d"}}});
        persistent_volume(&ok, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_bound_claims_spec_is_fixed_but_binding_and_expansion_are_allowed() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
        let mut bound = old.clone();
        bound["spec"]["volumeName"] = json!("pv-1");
        bound["spec"]["storageClassName"] = json!("local-path");
        bound["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        let mut out = Vec::new();
        persistent_volume_claim(&bound, Some(&old), &mut out);
        assert!(out.is_empty(), "{out:?}");
        let mut moved = bound.clone();
        moved["spec"]["volumeName"] = json!("pv-2");
        persistent_volume_claim(&moved, Some(&bound), &mut out);
        assert_eq!(messages(&out), ["spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"]);
    }

    #[test]
    fn a_class_names_its_provisioner_and_keeps_it() {
        let old = json!({"provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"});
        let mut out = Vec::new();
        storage_class(&old, None, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let mut changed = old.clone();
        changed["reclaimPolicy"] = json!("Retain");
        storage_class(&changed, Some(&old), &mut out);
        assert_eq!(
            messages(&out),
            ["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."]
        );
    }
}
