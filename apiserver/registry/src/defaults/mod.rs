//! Defaulting as kube-apiserver does it (upstream `SetDefaults_*` plus the few admission
//! defaults clients rely on). Applied in place on create and update; running it twice changes
//! nothing more.

mod apps;
mod autoscaling;
mod batch;
mod core;
mod network;
mod pod;
mod quota;
mod rbac;
mod service;
mod statefulset;
mod storage;

use serde_json::Value;

/// Fills the fields kube-apiserver would fill for `kind`. Unknown kinds and non-object values
/// are left alone.
pub fn apply_defaults(kind: &str, obj: &mut Value) {
    let Some(obj) = obj.as_object_mut() else {
        return;
    };
    match kind {
        "Pod" => pod::pod(obj),
        "Service" => service::service(obj),
        "Deployment" => apps::deployment(obj),
        "ReplicaSet" => apps::replica_set(obj),
        "DaemonSet" => apps::daemon_set(obj),
        "Job" => batch::job(obj),
        "CronJob" => batch::cron_job(obj),
        "StatefulSet" => statefulset::stateful_set(obj),
        "CertificateSigningRequest" => core::csr(obj),
        "Namespace" => core::namespace(obj),
        "Secret" => core::secret(obj),
        "Node" => core::node(obj),
        "Endpoints" => core::endpoints(obj),
        "PersistentVolume" => storage::persistent_volume(obj),
        "PersistentVolumeClaim" => storage::persistent_volume_claim(obj),
        "StorageClass" => storage::storage_class(obj),
        "EndpointSlice" => core::endpoint_slice(obj),
        "NetworkPolicy" => network::network_policy(obj),
        "HorizontalPodAutoscaler" => autoscaling::horizontal_pod_autoscaler(obj),
        "RoleBinding" | "ClusterRoleBinding" => rbac::binding(obj),
        "LimitRange" => quota::limit_range(obj),
        "PriorityClass" => quota::priority_class(obj),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
