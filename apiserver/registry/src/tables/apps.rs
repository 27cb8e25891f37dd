//! Deployment, ReplicaSet and DaemonSet rows.

use super::{age, age_col, col, name, name_col, template_cells, template_columns, Column};
use crate::json::{at, int_at, map_at};
use chrono::{DateTime, Utc};
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

fn wide_columns() -> Vec<Column> {
    let mut cols = template_columns().to_vec();
    cols.extend([
        col("Selector", "string", 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
    ]);
    cols
}

pub(super) fn deployment_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col("Ready", "string", 0, "Number of the pod with ready state"),
        col("Up-to-date", "integer", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        col("Available", "integer", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        age_col(),
    ];
    cols.extend(wide_columns());
    cols
}

pub(super) fn replica_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col(
            "Desired",
            "integer",
            0,
            "Replicas is the number of desired replicas.",
        ),
        col(
            "Current",
            "integer",
            0,
            "Replicas is the most recently observed number of replicas.",
        ),
        col(
            "Ready",
            "integer",
            0,
            "The number of ready replicas for this replica set.",
        ),
        age_col(),
    ];
    cols.extend(wide_columns());
    cols
}

fn spec_replicas(obj: &Value) -> i64 {
    at(obj, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn status_int(obj: &Value, key: &str) -> i64 {
    obj.get("status").and_then(|s| int_at(s, key)).unwrap_or(0)
}

/// Containers, Images and Selector, from the pod template.
fn wide_cells(obj: &Value) -> [Value; 3] {
    let empty = json!({});
    let [names, images] = template_cells(obj, &["spec", "template", "spec"]);
    let sel = at(obj, &["spec", "selector"]).unwrap_or(&empty);
    [names, images, json!(selector_text(sel))]
}

/// The selector as kubectl shows it; stored selectors are valid, so the error case is empty.
fn selector_text(sel: &Value) -> String {
    LabelSelector::from_json(sel)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

pub(super) fn deployment_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let ready = status_int(obj, "readyReplicas");
    let mut cells = vec![
        name(obj),
        json!(format!("{ready}/{}", spec_replicas(obj))),
        json!(status_int(obj, "updatedReplicas")),
        json!(status_int(obj, "availableReplicas")),
        age(obj, now),
    ];
    cells.extend(wide_cells(obj));
    cells
}

pub(super) fn replica_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![
        name(obj),
        json!(spec_replicas(obj)),
        json!(status_int(obj, "replicas")),
        json!(status_int(obj, "readyReplicas")),
        age(obj, now),
    ];
    cells.extend(wide_cells(obj));
    cells
}

pub(super) fn daemon_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col("Desired", "integer", 0, "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
        col("Current", "integer", 0, "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
        col("Ready", "integer", 0, "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition."),
        col("Up-to-date", "integer", 0, "The total number of nodes that are running updated daemon pod"),
        col("Available", "integer", 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
        col("Node Selector", "string", 0, "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"),
        age_col(),
    ];
    cols.extend(wide_columns());
    cols
}

pub(super) fn daemon_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![name(obj)];
    for key in [
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    ] {
        cells.push(json!(status_int(obj, key)));
    }
    let empty = json!({});
    let pod = at(obj, &["spec", "template", "spec"]).unwrap_or(&empty);
    cells.push(json!(format_labels(map_at(pod, "nodeSelector"))));
    cells.push(age(obj, now));
    cells.extend(wide_cells(obj));
    cells
}

/// A label map as upstream's labels.FormatLabels: "k=v" sorted by key, "<none>" when empty.
fn format_labels(map: Option<&serde_json::Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs.sort();
    pairs.join(",")
}
