//! What `kubectl get` prints: Table columns and row cells per kind, like upstream's printers
//! (pkg/printers/internalversion/printers.go). The server always sends every column, wide ones
//! included (priority 1); kubectl upper-cases the names and hides priority 1 without `-o wide`.

mod age;
mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod core;
mod csi;
mod network;
mod pod;
mod policy;
mod quota;
mod rbac;
mod service;
mod statefulset;
mod storage;

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
pub(crate) const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.";

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

/// How one kind prints, as upstream's printers register it: its columns and one object's cells.
struct Printer {
    kind: &'static str,
    columns: fn() -> Vec<Column>,
    cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

macro_rules! printers {
    ($($kind:literal => $columns:path, $cells:path;)*) => {
        &[$(Printer { kind: $kind, columns: $columns, cells: $cells }),*]
    };
}

const PRINTERS: &[Printer] = printers! {
    "Pod" => pod::columns, pod::cells;
    "Deployment" => apps::deployment_columns, apps::deployment_cells;
    "ReplicaSet" => apps::replica_set_columns, apps::replica_set_cells;
    "DaemonSet" => apps::daemon_set_columns, apps::daemon_set_cells;
    "Job" => batch::job_columns, batch::job_cells;
    "CronJob" => batch::cron_job_columns, batch::cron_job_cells;
    "StatefulSet" => statefulset::stateful_set_columns, statefulset::stateful_set_cells;
    "ControllerRevision" => statefulset::controller_revision_columns, statefulset::controller_revision_cells;
    "CertificateSigningRequest" => certificates::csr_columns, certificates::csr_cells;
    "Service" => service::service_columns, service::service_cells;
    "Endpoints" => service::endpoints_columns, service::endpoints_cells;
    "EndpointSlice" => service::endpoint_slice_columns, service::endpoint_slice_cells;
    "Ingress" => network::ingress_columns, network::ingress_cells;
    "IngressClass" => network::ingress_class_columns, network::ingress_class_cells;
    "NetworkPolicy" => network::network_policy_columns, network::network_policy_cells;
    "HorizontalPodAutoscaler" => autoscaling::hpa_columns, autoscaling::hpa_cells;
    "PodDisruptionBudget" => policy::pdb_columns, policy::pdb_cells;
    "ResourceQuota" => quota::resource_quota_columns, quota::resource_quota_cells;
    "LimitRange" => rbac::role_columns, rbac::role_cells;
    "PriorityClass" => quota::priority_class_columns, quota::priority_class_cells;
    "PersistentVolume" => storage::persistent_volume_columns, storage::persistent_volume_cells;
    "PersistentVolumeClaim" => storage::persistent_volume_claim_columns, storage::persistent_volume_claim_cells;
    "StorageClass" => storage::storage_class_columns, storage::storage_class_cells;
    "CSIDriver" => csi::csi_driver_columns, csi::csi_driver_cells;
    "CSINode" => csi::csi_node_columns, csi::csi_node_cells;
    "VolumeAttachment" => csi::volume_attachment_columns, csi::volume_attachment_cells;
    "CSIStorageCapacity" => csi::csi_storage_capacity_columns, csi::csi_storage_capacity_cells;
    "Node" => core::node_columns, core::node_cells;
    "Namespace" => core::namespace_columns, core::namespace_cells;
    "ConfigMap" => core::config_map_columns, core::config_map_cells;
    "Secret" => core::secret_columns, core::secret_cells;
    "ServiceAccount" => core::service_account_columns, core::service_account_cells;
    "Event" => core::event_columns, core::event_cells;
    "Lease" => core::lease_columns, core::lease_cells;
    "Role" => rbac::role_columns, rbac::role_cells;
    "ClusterRole" => rbac::role_columns, rbac::role_cells;
    "RoleBinding" => rbac::binding_columns, rbac::binding_cells;
    "ClusterRoleBinding" => rbac::binding_columns, rbac::binding_cells;
};

fn printer(kind: &str) -> Option<&'static Printer> {
    PRINTERS.iter().find(|p| p.kind == kind)
}

/// The columns of `kind`; unknown kinds get Name and Age.
pub fn columns(kind: &str) -> Vec<Column> {
    printer(kind).map_or_else(|| around(Vec::new()), |p| (p.columns)())
}

/// The row cells of `obj`, one per entry of `columns(kind)`.
pub fn cells(kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    match printer(kind) {
        Some(p) => (p.cells)(obj, now),
        None => between(obj, now, Vec::new()),
    }
}

/// Name, `middle`, Age: the columns of most kinds.
pub(crate) fn around(middle: Vec<Column>) -> Vec<Column> {
    let mut cols = vec![name_col()];
    cols.extend(middle);
    cols.push(age_col());
    cols
}

/// The cells for `around`'s columns.
pub(crate) fn between(obj: &Value, now: DateTime<Utc>, middle: Vec<Value>) -> Vec<Value> {
    let mut cells = vec![name(obj)];
    cells.extend(middle);
    cells.push(age(obj, now));
    cells
}

/// The string at `path`, "" when absent.
/// CONTAINERS and IMAGES of `-o wide` for kinds with a pod template.
pub(crate) fn template_columns() -> [Column; 2] {
    [
        col(
            "Containers",
            "string",
            1,
            "Names of each container in the template.",
        ),
        col(
            "Images",
            "string",
            1,
            "Images referenced by each container in the template.",
        ),
    ]
}

/// The cells of `template_columns`, from the pod spec at `path` in `obj`.
pub(crate) fn template_cells(obj: &Value, path: &[&str]) -> [Value; 2] {
    let containers = crate::json::at(obj, path)
        .map(|spec| crate::json::items(spec, "containers"))
        .unwrap_or_default();
    let field = |f: &str| -> Value {
        let v: Vec<&str> = containers
            .iter()
            .map(|c| crate::json::str_at(c, f))
            .collect();
        Value::from(v.join(","))
    };
    [field("name"), field("image")]
}

pub(crate) fn text_at(obj: &Value, path: &[&str]) -> Value {
    json!(at(obj, path).and_then(Value::as_str).unwrap_or(""))
}

pub(crate) fn name(obj: &Value) -> Value {
    text_at(obj, &["metadata", "name"])
}

pub(crate) fn age(obj: &Value, now: DateTime<Utc>) -> Value {
    let created = obj
        .get("metadata")
        .map_or("", |m| str_at(m, "creationTimestamp"));
    json!(age::since(created, now))
}

/// "a,b,c" or, past `max` entries, "a,b,c + 2 more..." (upstream's listWithMoreString).
pub(crate) fn list_with_more(list: &[String], max: usize, empty: &str) -> String {
    if let (Some(shown), Some(more @ 1..)) = (list.get(..max), list.len().checked_sub(max)) {
        return format!("{} + {more} more...", shown.join(","));
    }
    if list.is_empty() {
        return empty.to_string();
    }
    list.join(",")
}

#[cfg(test)]
mod tests;
