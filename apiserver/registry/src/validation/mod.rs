//! Validation of whole objects, after defaulting, with upstream's field paths and messages.

mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod container;
mod core;
mod csi;
mod ephemeral;
mod field_checks;
mod lifecycle;
mod meta;
mod network;
mod pod;
mod policy;
mod quota;
pub(crate) mod rbac;
mod service;
mod statefulset;
mod storage;

use crate::cause::Cause;
pub use quota::SYSTEM_PRIORITY_CLASSES;
use serde_json::Value;

/// Everything wrong with `obj`; empty means valid. `old` is the stored object on update, for the
/// immutable-field rules. A Pod's `spec.nodeName` may go from empty to set on update, so that a
/// pods/binding applied as an update passes; once set it is immutable like the rest of the spec.
pub fn validate(kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    meta::object_meta(kind, obj, &mut out);
    match kind {
        "Pod" => pod::pod(obj, old, &mut out),
        "Deployment" => apps::deployment(obj, old, &mut out),
        "ReplicaSet" => apps::replica_set(obj, old, &mut out),
        "DaemonSet" => apps::daemon_set(obj, old, &mut out),
        "Job" => batch::job(obj, old, &mut out),
        "CronJob" => batch::cron_job(obj, old, &mut out),
        "StatefulSet" => statefulset::stateful_set(obj, old, &mut out),
        "ControllerRevision" => statefulset::controller_revision(obj, old, &mut out),
        "CertificateSigningRequest" => certificates::csr(obj, old, &mut out),
        "Service" => service::service(obj, old, &mut out),
        "Endpoints" => network::endpoints(obj, &mut out),
        "PersistentVolume" => storage::persistent_volume(obj, &mut out),
        "PersistentVolumeClaim" => storage::persistent_volume_claim(obj, old, &mut out),
        "StorageClass" => storage::storage_class(obj, old, &mut out),
        "VolumeAttachment" => csi::volume_attachment(obj, old, &mut out),
        "EndpointSlice" => network::endpoint_slice(obj, old, &mut out),
        "Ingress" => network::ingress(obj, &mut out),
        "IngressClass" => network::ingress_class(obj, old, &mut out),
        "NetworkPolicy" => network::network_policy(obj, &mut out),
        "HorizontalPodAutoscaler" => autoscaling::horizontal_pod_autoscaler(obj, &mut out),
        "PodDisruptionBudget" => policy::pod_disruption_budget(obj, &mut out),
        "ResourceQuota" => quota::resource_quota(obj, &mut out),
        "LimitRange" => quota::limit_range(obj, &mut out),
        "PriorityClass" => quota::priority_class(obj, old, &mut out),
        "CustomResourceDefinition" => crate::custom::validate_crd(obj, old, &mut out),
        "ConfigMap" => core::config_map(obj, old, &mut out),
        "Secret" => core::secret(obj, old, &mut out),
        "Namespace" => core::namespace(obj, &mut out),
        "Node" => core::node(obj, &mut out),
        "Event" => core::event(obj, &mut out),
        "Lease" => core::lease(obj, &mut out),
        "Role" => rbac::role(obj, true, &mut out),
        "ClusterRole" => rbac::role(obj, false, &mut out),
        "RoleBinding" => rbac::binding(obj, old, true, &mut out),
        "ClusterRoleBinding" => rbac::binding(obj, old, false, &mut out),
        _ => {}
    }
    out
}

/// Everything wrong with a Pod written through pods/ephemeralcontainers over `old`, as
/// upstream's ValidatePodEphemeralContainersUpdate: the Pod's rules, and its existing
/// ephemeral containers neither changed nor removed. The rest of the spec is `old`'s (the
/// server takes only the ephemeral list), so the main update's immutability rule is left out.
pub fn validate_ephemeral_containers(obj: &Value, old: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    meta::object_meta("Pod", obj, &mut out);
    pod::ephemeral_update(obj, old, &mut out);
    out
}

#[cfg(test)]
mod tests;
