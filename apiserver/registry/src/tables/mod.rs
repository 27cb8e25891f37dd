//! What `kubectl get` prints: Table columns and row cells per kind, like upstream's printers
//! (pkg/printers/internalversion/printers.go). The server always sends every column, wide ones
//! included (priority 1); kubectl upper-cases the names and hides priority 1 without `-o wide`.

mod age;
mod apps;
mod core;
mod network;
mod pod;
mod service;

pub use age::human_age;

use crate::json::{at, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// One Table column definition (meta.k8s.io/v1 TableColumnDefinition).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: &'static str,
    /// "string" | "integer" | "date".
    pub type_: &'static str,
    /// "name" for the object name column, else "".
    pub format: &'static str,
    pub description: &'static str,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: i32,
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.";
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.";

pub(crate) fn col(
    name: &'static str,
    type_: &'static str,
    priority: i32,
    doc: &'static str,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description: doc,
        priority,
    }
}

pub(crate) fn name_col() -> Column {
    Column {
        format: "name",
        ..col("Name", "string", 0, NAME_DOC)
    }
}

pub(crate) fn age_col() -> Column {
    col("Age", "string", 0, AGE_DOC)
}

/// The columns of `kind`; unknown kinds get Name and Age.
pub fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => pod::columns(),
        "Deployment" => apps::deployment_columns(),
        "ReplicaSet" => apps::replica_set_columns(),
        "Service" => service::service_columns(),
        "Endpoints" => service::endpoints_columns(),
        "EndpointSlice" => service::endpoint_slice_columns(),
        "Ingress" => network::ingress_columns(),
        "IngressClass" => network::ingress_class_columns(),
        "Node" => core::node_columns(),
        "Namespace" => core::namespace_columns(),
        "ConfigMap" => core::config_map_columns(),
        "Secret" => core::secret_columns(),
        "ServiceAccount" => core::service_account_columns(),
        "Event" => core::event_columns(),
        "Lease" => core::lease_columns(),
        _ => vec![name_col(), age_col()],
    }
}

/// The row cells of `obj`, one per entry of `columns(kind)`.
pub fn cells(kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    match kind {
        "Pod" => pod::cells(obj, now),
        "Deployment" => apps::deployment_cells(obj, now),
        "ReplicaSet" => apps::replica_set_cells(obj, now),
        "Service" => service::service_cells(obj, now),
        "Endpoints" => service::endpoints_cells(obj, now),
        "EndpointSlice" => service::endpoint_slice_cells(obj, now),
        "Ingress" => network::ingress_cells(obj, now),
        "IngressClass" => network::ingress_class_cells(obj, now),
        "Node" => core::node_cells(obj, now),
        "Namespace" => core::namespace_cells(obj, now),
        "ConfigMap" => core::config_map_cells(obj, now),
        "Secret" => core::secret_cells(obj, now),
        "ServiceAccount" => core::service_account_cells(obj, now),
        "Event" => core::event_cells(obj, now),
        "Lease" => core::lease_cells(obj, now),
        _ => vec![name(obj), age(obj, now)],
    }
}

pub(crate) fn name(obj: &Value) -> Value {
    json!(at(obj, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or(""))
}

pub(crate) fn age(obj: &Value, now: DateTime<Utc>) -> Value {
    let created = obj
        .get("metadata")
        .map_or("", |m| str_at(m, "creationTimestamp"));
    json!(age::since(created, now))
}

/// "a,b,c" or, past `max` entries, "a,b,c + 2 more..." (upstream's listWithMoreString).
pub(crate) fn list_with_more(list: &[String], max: usize, empty: &str) -> String {
    if list.len() > max {
        return format!("{} + {} more...", list[..max].join(","), list.len() - max);
    }
    if list.is_empty() {
        return empty.to_string();
    }
    list.join(",")
}

#[cfg(test)]
mod tests;
