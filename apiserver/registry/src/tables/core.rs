//! Node, Namespace, ConfigMap, Secret, ServiceAccount, Event and Lease rows.

use super::age::since;
use super::{age, age_col, around, between, col, name, name_col, text_at, Column};
use crate::json::{at, bool_at, int_at, items, map_at, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::BTreeSet;

pub(super) fn node_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Status", "string", 0, "The status of the node"),
        col("Roles", "string", 0, "The roles of the node"),
        age_col(),
        col("Version", "string", 0, "Kubelet Version reported by the node."),
        col("Internal-IP", "string", 1, "List of addresses reachable to the node. Queried from cloud provider, if available."),
        col("External-IP", "string", 1, "List of addresses reachable to the node. Queried from cloud provider, if available."),
        col("OS-Image", "string", 1, "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
        col("Kernel-Version", "string", 1, "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
        col("Container-Runtime", "string", 1, "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
    ]
}

fn node_status(obj: &Value) -> String {
    let empty = json!({});
    let status = obj.get("status").unwrap_or(&empty);
    let ready = items(status, "conditions")
        .iter()
        .rev()
        .find(|c| str_at(c, "type") == "Ready");
    let mut parts = vec![match ready {
        Some(c) if str_at(c, "status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.get("spec").is_some_and(|s| bool_at(s, "unschedulable")) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

/// Roles from `node-role.kubernetes.io/<role>` labels and the older `kubernetes.io/role`.
fn node_roles(obj: &Value) -> String {
    let labels = at(obj, &["metadata", "labels"]).and_then(Value::as_object);
    let mut roles = BTreeSet::new();
    for (k, v) in labels.into_iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == "kubernetes.io/role" {
            if let Some(role) = v.as_str().filter(|r| !r.is_empty()) {
                roles.insert(role.to_string());
            }
        }
    }
    if roles.is_empty() {
        return "<none>".to_string();
    }
    roles.into_iter().collect::<Vec<_>>().join(",")
}

fn node_address(status: &Value, kind: &str) -> String {
    items(status, "addresses")
        .iter()
        .find(|a| str_at(a, "type") == kind)
        .map_or("<none>".to_string(), |a| str_at(a, "address").to_string())
}

pub(super) fn node_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let status = obj.get("status").unwrap_or(&empty);
    let info = status.get("nodeInfo").unwrap_or(&empty);
    let known = |key: &str| match str_at(info, key) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        name(obj),
        json!(node_status(obj)),
        json!(node_roles(obj)),
        age(obj, now),
        json!(str_at(info, "kubeletVersion")),
        json!(node_address(status, "InternalIP")),
        json!(node_address(status, "ExternalIP")),
        json!(known("osImage")),
        json!(known("kernelVersion")),
        json!(known("containerRuntimeVersion")),
    ]
}

pub(super) fn namespace_columns() -> Vec<Column> {
    around(vec![col(
        "Status",
        "string",
        0,
        "The status of the namespace",
    )])
}

pub(super) fn namespace_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    between(obj, now, vec![text_at(obj, &["status", "phase"])])
}

fn count(obj: &Value, key: &str) -> usize {
    map_at(obj, key).map_or(0, |m| m.len())
}

pub(super) fn config_map_columns() -> Vec<Column> {
    around(vec![col(
        "Data",
        "integer",
        0,
        "Data contains the configuration data.",
    )])
}

pub(super) fn config_map_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let n = count(obj, "data") + count(obj, "binaryData");
    between(obj, now, vec![json!(n)])
}

pub(super) fn secret_columns() -> Vec<Column> {
    let type_doc = "Used to facilitate programmatic handling of secret data.";
    around(vec![
        col("Type", "string", 0, type_doc),
        col("Data", "integer", 0, "Data contains the secret data."),
    ])
}

pub(super) fn secret_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let middle = vec![json!(str_at(obj, "type")), json!(count(obj, "data"))];
    between(obj, now, middle)
}

pub(super) fn service_account_columns() -> Vec<Column> {
    around(vec![col("Secrets", "integer", 0, "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.")])
}

pub(super) fn service_account_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    between(obj, now, vec![json!(items(obj, "secrets").len())])
}

pub(super) fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", 0, "The time at which the most recent occurrence of this event was recorded."),
        col("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future."),
        col("Reason", "string", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        col("Object", "string", 0, "The object that this event is about."),
        col("Subobject", "string", 1, "The subobject (e.g. a container) that this event is about."),
        col("Source", "string", 1, "The component reporting this event."),
        col("Message", "string", 0, "A human-readable description of the status of this operation."),
        col("First Seen", "string", 1, "The time at which the event was first recorded."),
        col("Count", "string", 1, "The number of times this event has occurred."),
        Column { priority: 1, ..name_col() },
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() {
        b
    } else {
        a
    }
}

pub(super) fn event_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let first = match str_at(obj, "firstTimestamp") {
        "" => since(str_at(obj, "eventTime"), now),
        t => since(t, now),
    };
    let mut last = match str_at(obj, "lastTimestamp") {
        "" => first.clone(),
        t => since(t, now),
    };
    let mut times = int_at(obj, "count").unwrap_or(0);
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last = since(str_at(series, "lastObservedTime"), now);
        times = int_at(series, "count").unwrap_or(0);
    } else if times == 0 {
        times = 1;
    }
    let involved = obj.get("involvedObject").unwrap_or(&empty);
    let kind = str_at(involved, "kind").to_lowercase();
    let target = match str_at(involved, "name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let source = obj.get("source").unwrap_or(&empty);
    let component = first_non_empty(
        str_at(source, "component"),
        str_at(obj, "reportingComponent"),
    );
    let instance = first_non_empty(str_at(source, "host"), str_at(obj, "reportingInstance"));
    let source_text = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(str_at(obj, "type")),
        json!(str_at(obj, "reason")),
        json!(target),
        json!(str_at(involved, "fieldPath")),
        json!(source_text),
        json!(str_at(obj, "message").trim()),
        json!(first),
        json!(times),
        name(obj),
    ]
}

pub(super) fn lease_columns() -> Vec<Column> {
    around(vec![col("Holder", "string", 0, "The holder of the lease")])
}

pub(super) fn lease_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    between(obj, now, vec![text_at(obj, &["spec", "holderIdentity"])])
}
