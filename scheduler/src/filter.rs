//! Filters: can this Pod run on this node? Each returns the reason it cannot, in upstream's words.

use crate::NodeInfo;
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use keelson_apimachinery::quantity;

/// The Pod's requests (cpu in cores, memory in bytes), summed over its containers, with the
/// largest init container counted if it needs more.
pub fn requests(pod: &Pod) -> (f64, f64) {
    let get = |c: &k8s_openapi::api::core::v1::Container, r: &str| {
        c.resources
            .as_ref()
            .and_then(|res| res.requests.as_ref())
            .and_then(|m| m.get(r))
            .and_then(|q| quantity::parse(&q.0))
            .unwrap_or(0.0)
    };
    let Some(spec) = pod.spec.as_ref() else {
        return (0.0, 0.0);
    };
    let cpu: f64 = spec.containers.iter().map(|c| get(c, "cpu")).sum();
    let mem: f64 = spec.containers.iter().map(|c| get(c, "memory")).sum();
    let inits = spec.init_containers.iter().flatten();
    let icpu = inits.clone().map(|c| get(c, "cpu")).fold(0.0, f64::max);
    let imem = inits.map(|c| get(c, "memory")).fold(0.0, f64::max);
    (cpu.max(icpu), mem.max(imem))
}

pub fn allocatable(node: &Node, r: &str) -> f64 {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .and_then(|m| m.get(r))
        .and_then(|q| quantity::parse(&q.0))
        .unwrap_or(0.0)
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key_ok = t.key.as_deref().is_none_or(|k| k.is_empty())
            || t.key.as_deref() == Some(taint.key.as_str());
        let value_ok = t.operator.as_deref() == Some("Exists")
            || t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("");
        effect_ok && key_ok && value_ok
    })
}

fn host_ports(pod: &Pod) -> Vec<(i32, String)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            p.host_port
                .filter(|h| *h > 0)
                .map(|h| (h, p.protocol.clone().unwrap_or_else(|| "TCP".into())))
        })
        .collect()
}

/// Why `pod` cannot go to `info`'s node, or None when it fits.
pub fn unfit(pod: &Pod, info: &NodeInfo) -> Option<&'static str> {
    let node = &info.node;
    if !ready(node) {
        return Some("node(s) were not ready");
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node(s) were unschedulable");
    }
    let spec = pod.spec.as_ref()?;
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| !tolerates(&tolerations, t))
    {
        return Some("node(s) had untolerated taint");
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if spec
        .node_selector
        .iter()
        .flatten()
        .any(|(k, v)| labels.get(k) != Some(v))
    {
        return Some("node(s) didn't match Pod's node affinity/selector");
    }
    let (cpu, mem) = requests(pod);
    let (used_cpu, used_mem) = info
        .pods
        .iter()
        .map(requests)
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    if cpu > 0.0 && used_cpu + cpu > allocatable(node, "cpu") {
        return Some("Insufficient cpu");
    }
    if mem > 0.0 && used_mem + mem > allocatable(node, "memory") {
        return Some("Insufficient memory");
    }
    let max_pods = allocatable(node, "pods");
    if max_pods > 0.0 && info.pods.len() as f64 + 1.0 > max_pods {
        return Some("Too many pods");
    }
    let wanted = host_ports(pod);
    if !wanted.is_empty()
        && info
            .pods
            .iter()
            .flat_map(host_ports)
            .any(|p| wanted.contains(&p))
    {
        return Some("node(s) didn't have free ports for the requested pod ports");
    }
    None
}
