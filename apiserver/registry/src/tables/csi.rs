//! CSIDriver, CSINode, VolumeAttachment and CSIStorageCapacity rows, as upstream's printers
//! make them: the storage.k8s.io kinds that CSI drivers' install manifests create and read.

use super::{around, between, col, Column};
use crate::json::at;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// A boolean at `path`, `default` when absent, as "true" or "false".
fn flag(obj: &Value, path: &[&str], default: bool) -> Value {
    let v = at(obj, path).and_then(Value::as_bool).unwrap_or(default);
    json!(v)
}

/// The strings of a list at `path` joined with commas, or `empty`.
fn joined(obj: &Value, path: &[&str], field: Option<&str>, empty: &str) -> Value {
    let items: Vec<&str> = at(obj, path)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| match field {
            Some(f) => i.get(f).and_then(Value::as_str),
            None => i.as_str(),
        })
        .collect();
    match items.is_empty() {
        true => json!(empty),
        false => json!(items.join(",")),
    }
}

fn text(obj: &Value, path: &[&str]) -> Value {
    json!(at(obj, path).and_then(Value::as_str).unwrap_or_default())
}

pub(super) fn csi_driver_columns() -> Vec<Column> {
    around(vec![
        col("AttachRequired", "boolean", 0, "Indicates this CSI volume driver requires an attach operation, and that Kubernetes should call attach and wait for any attach operation to complete before proceeding to mount."),
        col("PodInfoOnMount", "boolean", 0, "Indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations."),
        col("StorageCapacity", "boolean", 0, "Indicates this CSI volume driver supports storage capacity tracking."),
        col("TokenRequests", "string", 0, "Indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication."),
        col("RequiresRepublish", "boolean", 0, "RequiresRepublish indicates the CSI driver wants NodePublishVolume being periodically called to reflect any possible change in the mounted volume."),
        col("Modes", "string", 0, "Defines the kinds of CSI volumes supported by the driver."),
    ])
}

pub(super) fn csi_driver_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    between(
        obj,
        now,
        vec![
            flag(obj, &["spec", "attachRequired"], true),
            flag(obj, &["spec", "podInfoOnMount"], false),
            flag(obj, &["spec", "storageCapacity"], false),
            joined(obj, &["spec", "tokenRequests"], Some("audience"), "<unset>"),
            flag(obj, &["spec", "requiresRepublish"], false),
            joined(obj, &["spec", "volumeLifecycleModes"], None, "<none>"),
        ],
    )
}

pub(super) fn csi_node_columns() -> Vec<Column> {
    around(vec![col(
        "Drivers",
        "integer",
        0,
        "Drivers indicates the number of CSI drivers registered on the node",
    )])
}

pub(super) fn csi_node_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let drivers = at(obj, &["spec", "drivers"])
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    between(obj, now, vec![json!(drivers)])
}

pub(super) fn volume_attachment_columns() -> Vec<Column> {
    around(vec![
        col("Attacher", "string", 0, "Attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName()."),
        col("PV", "string", 0, "Name of the persistent volume to attach."),
        col("Node", "string", 0, "The node that the volume should be attached to."),
        col("Attached", "boolean", 0, "Indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."),
    ])
}

pub(super) fn volume_attachment_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    between(
        obj,
        now,
        vec![
            text(obj, &["spec", "attacher"]),
            text(obj, &["spec", "source", "persistentVolumeName"]),
            text(obj, &["spec", "nodeName"]),
            flag(obj, &["status", "attached"], false),
        ],
    )
}

pub(super) fn csi_storage_capacity_columns() -> Vec<Column> {
    around(vec![
        col("StorageClassName", "string", 0, "The name of the StorageClass that the reported capacity applies to."),
        col("Capacity", "string", 0, "Capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields."),
    ])
}

pub(super) fn csi_storage_capacity_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let capacity = match obj.get("capacity").and_then(Value::as_str) {
        Some(c) => c.to_string(),
        None => "<unset>".to_string(),
    };
    between(
        obj,
        now,
        vec![text(obj, &["storageClassName"]), json!(capacity)],
    )
}
