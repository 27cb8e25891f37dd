//! What policy needs of a Pod and a Namespace: labels, the pod's IPv4 address and node, and its
//! named container ports (a policy's named port resolves per pod).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Namespace, Pod};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    pub name: String,
    /// "TCP", "UDP" or "SCTP".
    pub protocol: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ip: Ipv4Addr,
    pub node: String,
    pub ports: Vec<NamedPort>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// A pod policy applies to: one with an IPv4 address of its own that has not finished. Pods on
/// the host's network share the node's address and are left alone, as upstream leaves them.
pub fn pod_info(pod: &Pod) -> Option<PodInfo> {
    let spec = pod.spec.as_ref()?;
    if spec.host_network == Some(true) {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let ip = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.as_str())
        .chain(status.pod_ip.as_deref())
        .find_map(|s| s.parse::<Ipv4Addr>().ok())?;
    let ports = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(NamedPort {
                name: p.name.clone().filter(|n| !n.is_empty())?,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port: u16::try_from(p.container_port).ok()?,
            })
        })
        .collect();
    Some(PodInfo {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        ip,
        node: spec.node_name.clone().unwrap_or_default(),
        ports,
    })
}

pub fn namespace_info(ns: &Namespace) -> NamespaceInfo {
    NamespaceInfo {
        name: ns.metadata.name.clone().unwrap_or_default(),
        labels: ns.metadata.labels.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn running_pod_with_named_port() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "web", "namespace": "a", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": 8080},
                {"containerPort": 9090},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"phase": "Running", "podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}]}
        }));
        let info = pod_info(&p).unwrap();
        assert_eq!(info.ip, Ipv4Addr::new(10, 244, 0, 5));
        assert_eq!(
            (info.node.as_str(), info.labels["app"].as_str()),
            ("n1", "web")
        );
        let names: Vec<_> = info
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.protocol.as_str(), p.port))
            .collect();
        assert_eq!(names, [("http", "TCP", 8080), ("dns", "UDP", 53)]);
    }

    #[test]
    fn pods_policy_ignores() {
        let base = |spec: serde_json::Value, status: serde_json::Value| {
            pod(serde_json::json!({"metadata": {"name": "p"}, "spec": spec, "status": status}))
        };
        let containers = serde_json::json!([{"name": "c"}]);
        for p in [
            base(
                serde_json::json!({"containers": containers}),
                serde_json::json!({"phase": "Pending"}),
            ),
            base(
                serde_json::json!({"containers": containers, "hostNetwork": true}),
                serde_json::json!({"podIP": "192.168.1.2"}),
            ),
            base(
                serde_json::json!({"containers": containers}),
                serde_json::json!({"phase": "Succeeded", "podIP": "10.244.0.9"}),
            ),
            base(
                serde_json::json!({"containers": containers}),
                serde_json::json!({"podIP": "fd00::5"}),
            ),
        ] {
            assert_eq!(pod_info(&p), None, "{p:?}");
        }
    }
}
