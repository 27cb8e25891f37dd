//! Filters: can this Pod run on this node? Each returns the reason it cannot, in upstream's words.

use crate::node_info::{host_ports, NodeInfo};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use keelson_apimachinery::taints::tolerates;
use std::borrow::Cow;

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Why `pod` cannot go to `info`'s node, or None when it fits.
/// `requests` is the Pod's own, from `requests(pod)`: parsed once per Pod, not once per node.
/// In upstream's filter order: node state, taints, selector, ports and resources.
pub fn unfit(pod: &Pod, requests: (f64, f64), info: &NodeInfo) -> Option<Cow<'static, str>> {
    if let Some(why) = node_unfit(&info.node) {
        return Some(Cow::Borrowed(why));
    }
    if let Some(taint) = untolerated_taint(pod, &info.node) {
        // Upstream names the first taint the Pod does not tolerate.
        let value = taint.value.as_deref().unwrap_or_default();
        return Some(Cow::Owned(format!(
            "node(s) had untolerated taint {{{}: {value}}}",
            taint.key
        )));
    }
    pod_unfit(pod, requests, info).map(Cow::Borrowed)
}

fn untolerated_taint<'a>(pod: &Pod, node: &'a Node) -> Option<&'a Taint> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Whether evicting lower-priority pods could make room, as upstream's preemption tells it
/// apart: resources and ports could be freed; taints, selectors and node state could not.
pub fn preemption_could_help(reason: &str) -> bool {
    reason.starts_with("Insufficient ") || reason == TOO_MANY_PODS || reason == PORTS_IN_USE
}

const TOO_MANY_PODS: &str = "Too many pods";
const PORTS_IN_USE: &str = "node(s) didn't have free ports for the requested pod ports";

fn node_unfit(node: &Node) -> Option<&'static str> {
    if !ready(node) {
        return Some("node(s) were not ready");
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node(s) were unschedulable");
    }
    None
}

fn pod_unfit(pod: &Pod, requests: (f64, f64), info: &NodeInfo) -> Option<&'static str> {
    let node = &info.node;
    let spec = pod.spec.as_ref()?;
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
        return Some(TOO_MANY_PODS);
    }
    if host_ports(pod).any(|p| info.host_ports.contains(&p)) {
        return Some(PORTS_IN_USE);
    }
    None
}
