//! PersistentVolume, PersistentVolumeClaim and StorageClass rows, as kubectl 1.32 prints them.

use super::{age, age_col, col, name, name_col, Column};
use crate::json::{at, str_at};
use chrono::{DateTime, Utc};
use keelson_apimachinery::well_known::DEFAULT_STORAGE_CLASS_ANNOTATION;
use serde_json::{json, Value};

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Upstream's GetAccessModesAsString: RWO, ROX, RWX, RWOP in that order, each once.
fn access_modes(obj: &Value, path: &[&str]) -> String {
    let modes: Vec<&str> = at(obj, path)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The phase, or Terminating while the object is being deleted.
fn phase(obj: &Value) -> String {
    match at(obj, &["metadata", "deletionTimestamp"]) {
        Some(t) if !t.is_null() => "Terminating".into(),
        _ => text(at(obj, &["status", "phase"])),
    }
}

fn or_unset(v: Option<&Value>) -> String {
    match text(v) {
        s if s.is_empty() => "<unset>".into(),
        s => s,
    }
}

/// The class: spec.storageClassName, else the beta annotation, as upstream's helpers.
fn class(obj: &Value) -> String {
    let beta = at(
        obj,
        &[
            "metadata",
            "annotations",
            "volume.beta.kubernetes.io/storage-class",
        ],
    );
    match text(at(obj, &["spec", "storageClassName"])) {
        s if s.is_empty() => text(beta),
        s => s,
    }
}

pub(super) fn persistent_volume_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Capacity", "string", 0, "capacity is the description of the persistent volume's resources and capacity."),
        col("Access Modes", "string", 0, "accessModes contains all ways the volume can be mounted."),
        col("Reclaim Policy", "string", 0, "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
        col("Status", "string", 0, "phase indicates if a volume is available, bound to a claim, or released by a claim."),
        col("Claim", "string", 0, "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
        col("StorageClass", "string", 0, "storageClassName is the name of StorageClass to which this persistent volume belongs."),
        col("VolumeAttributesClass", "string", 0, "Name of VolumeAttributesClass to which this persistent volume belongs."),
        col("Reason", "string", 0, "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
        age_col(),
        col("VolumeMode", "string", 1, "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state."),
    ]
}

pub(super) fn persistent_volume_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let claim = match at(obj, &["spec", "claimRef"]) {
        Some(r) if !r.is_null() => format!("{}/{}", str_at(r, "namespace"), str_at(r, "name")),
        _ => String::new(),
    };
    vec![
        name(obj),
        json!(text(at(obj, &["spec", "capacity", "storage"]))),
        json!(access_modes(obj, &["spec", "accessModes"])),
        json!(text(at(obj, &["spec", "persistentVolumeReclaimPolicy"]))),
        json!(phase(obj)),
        json!(claim),
        json!(class(obj)),
        json!(or_unset(at(obj, &["spec", "volumeAttributesClassName"]))),
        json!(text(at(obj, &["status", "reason"]))),
        age(obj, now),
        json!(or_unset(at(obj, &["spec", "volumeMode"]))),
    ]
}

pub(super) fn persistent_volume_claim_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Status", "string", 0, "phase represents the current phase of PersistentVolumeClaim."),
        col("Volume", "string", 0, "volumeName is the binding reference to the PersistentVolume backing this claim."),
        col("Capacity", "string", 0, "capacity represents the actual resources of the underlying volume."),
        col("Access Modes", "string", 0, "accessModes contains the desired access modes the volume should have."),
        col("StorageClass", "string", 0, "storageClassName is the name of the StorageClass required by the claim."),
        col("VolumeAttributesClass", "string", 0, "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."),
        age_col(),
        col("VolumeMode", "string", 1, "volumeMode defines what type of volume is required by the claim."),
    ]
}

pub(super) fn persistent_volume_claim_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let volume = text(at(obj, &["spec", "volumeName"]));
    // Size and modes are the bound volume's, shown once the claim names one.
    let (capacity, modes) = match volume.is_empty() {
        true => (String::new(), String::new()),
        false => (
            text(at(obj, &["status", "capacity", "storage"])),
            access_modes(obj, &["status", "accessModes"]),
        ),
    };
    vec![
        name(obj),
        json!(phase(obj)),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class(obj)),
        json!(or_unset(at(obj, &["spec", "volumeAttributesClassName"]))),
        age(obj, now),
        json!(or_unset(at(obj, &["spec", "volumeMode"]))),
    ]
}

pub(super) fn storage_class_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Provisioner", "string", 0, "provisioner indicates the type of the provisioner."),
        col("ReclaimPolicy", "string", 0, "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class."),
        col("VolumeBindingMode", "string", 0, "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound."),
        col("AllowVolumeExpansion", "string", 0, "allowVolumeExpansion shows whether the storage class allow volume expand."),
        age_col(),
    ]
}

pub(super) fn storage_class_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let default = at(
        obj,
        &["metadata", "annotations", DEFAULT_STORAGE_CLASS_ANNOTATION],
    )
    .and_then(Value::as_str)
        == Some("true");
    let shown = match default {
        true => format!("{} (default)", str_at(&obj["metadata"], "name")),
        false => str_at(&obj["metadata"], "name").to_string(),
    };
    let or = |key: &str, fallback: &str| match str_at(obj, key) {
        "" => fallback.to_string(),
        v => v.to_string(),
    };
    let expansion = obj.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true);
    vec![
        json!(shown),
        json!(str_at(obj, "provisioner")),
        json!(or("reclaimPolicy", "Delete")),
        json!(or("volumeBindingMode", "Immediate")),
        json!(expansion.to_string()),
        age(obj, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_as_kubectl_prints_them() {
        let now = Utc::now();
        let pv = json!({"metadata": {"name": "pvc-1"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": "default", "name": "data"}, "storageClassName": "local-path",
            "volumeMode": "Filesystem"}, "status": {"phase": "Bound"}});
        let cells = persistent_volume_cells(&pv, now);
        let shown: Vec<&str> = cells.iter().map(|c| c.as_str().unwrap_or("")).collect();
        assert_eq!(
            shown[..9],
            [
                "pvc-1",
                "1Gi",
                "RWO,RWX",
                "Delete",
                "Bound",
                "default/data",
                "local-path",
                "<unset>",
                ""
            ]
        );
        assert_eq!(cells.len(), persistent_volume_columns().len());
        let pending = json!({"metadata": {"name": "data"}, "spec": {"storageClassName": "local-path"},
            "status": {"phase": "Pending"}});
        let cells = persistent_volume_claim_cells(&pending, now);
        assert_eq!(
            cells[..6],
            [
                json!("data"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("local-path")
            ]
        );
        let sc = json!({"metadata": {"name": "local-path", "annotations": {DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"});
        let cells = storage_class_cells(&sc, now);
        assert_eq!(
            cells[..5],
            [
                json!("local-path (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!("false")
            ]
        );
    }
}
