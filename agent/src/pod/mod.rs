//! Pods on this node: the state machine and status (pure), translation to CRI configs (pure),
//! volumes and env, probes, and the workers and manager that drive them.

pub mod admit;
pub mod atomic_writer;
pub mod claims;
pub mod container_kind;
pub mod context;
pub mod critical;
pub mod decide;
pub mod dns;
pub mod env;
pub mod etc_hosts;
pub mod events;
pub mod local_path;
pub mod local_storage;
pub mod log_rotation;
pub mod manager;
pub mod observed;
pub mod probe;
mod probe_tls;
pub mod pull_secrets;
pub mod qos;
pub mod security;
pub mod service_env;
pub mod static_pods;
pub mod status;
pub mod sub_path;
pub mod tokens;
pub mod translate;
pub mod volume_fs;
pub mod volumes;
pub mod worker;

/// A pod as upstream's messages name it (`format.Pod`): `name_namespace(uid)`.
pub fn format_pod(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    )
}
