//! Filters: can this Pod run on this node? Each returns the reason it cannot, in upstream's words.

use crate::node_info::{host_ports, NodeInfo};
use k8s_openapi::api::core::v1::{Node, Pod};
use keelson_apimachinery::taints::tolerates;

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Why `pod` cannot go to `info`'s node, or None when it fits.
/// `requests` is the Pod's own, from `requests(pod)`: parsed once per Pod, not once per node.
pub fn unfit(pod: &Pod, requests: (f64, f64), info: &NodeInfo) -> Option<&'static str> {
    let node = &info.node;
    if !ready(node) {
        return Some("node(s) were not ready");
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node(s) were unschedulable");
    }
    let spec = pod.spec.as_ref()?;
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    if taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
    {
        return Some("node(s) had untolerated taint");
    }
    let labels = node.metadata.labels.as_ref();
    if spec
        .node_selector
        .iter()
        .flatten()
        .any(|(k, v)| labels.and_then(|l| l.get(k)) != Some(v))
    {
        return Some("node(s) didn't match Pod's node affinity/selector");
    }
    let (cpu, mem) = requests;
    let (alloc_cpu, alloc_mem, max_pods) = info.allocatable;
    if cpu > 0.0 && info.requested.0 + cpu > alloc_cpu {
        return Some("Insufficient cpu");
    }
    if mem > 0.0 && info.requested.1 + mem > alloc_mem {
        return Some("Insufficient memory");
    }
    if max_pods > 0.0 && info.pods as f64 + 1.0 > max_pods {
        return Some("Too many pods");
    }
    if host_ports(pod).any(|p| info.host_ports.contains(&p)) {
        return Some("node(s) didn't have free ports for the requested pod ports");
    }
    None
}
