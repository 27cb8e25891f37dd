//! A node and what its Pods (bound or assumed) add up to. Filters and scores read only these
//! sums, so placing one Pod costs the same whether a node holds 3 Pods or 100: the Pods' own
//! quantities are parsed once, when they are added, not once per candidate node.

use k8s_openapi::api::core::v1::{Node, Pod};
use keelson_apimachinery::quantity;
use std::collections::{HashMap, HashSet};

/// A Pod's requests (cpu in cores, memory in bytes), summed over its containers, with the
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

/// The uid of the Pod's controller (its ReplicaSet, say), if any.
pub fn owner(p: &Pod) -> Option<&str> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// The host ports a Pod asks for, with their protocol.
pub fn host_ports(pod: &Pod) -> impl Iterator<Item = (i32, String)> + '_ {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            p.host_port
                .filter(|h| *h > 0)
                .map(|h| (h, p.protocol.clone().unwrap_or_else(|| "TCP".into())))
        })
}

fn allocatable(node: &Node, r: &str) -> f64 {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .and_then(|m| m.get(r))
        .and_then(|q| quantity::parse(&q.0))
        .unwrap_or(0.0)
}

#[derive(Clone)]
pub struct NodeInfo {
    pub node: Node,
    /// Allocatable cpu (cores), memory (bytes) and Pod count; 0 when not reported.
    pub allocatable: (f64, f64, f64),
    /// Images present on the node, by every name it reports.
    pub images: HashSet<String>,
    pub pods: usize,
    /// Summed requests of the Pods on the node (cpu, memory).
    pub requested: (f64, f64),
    /// Pods on the node per controller uid.
    pub owners: HashMap<String, usize>,
    pub host_ports: HashSet<(i32, String)>,
}

impl NodeInfo {
    pub fn new(node: Node) -> NodeInfo {
        let images = node
            .status
            .iter()
            .flat_map(|s| s.images.iter().flatten())
            .flat_map(|i| i.names.iter().flatten().cloned())
            .collect();
        NodeInfo {
            allocatable: (
                allocatable(&node, "cpu"),
                allocatable(&node, "memory"),
                allocatable(&node, "pods"),
            ),
            images,
            node,
            pods: 0,
            requested: (0.0, 0.0),
            owners: HashMap::new(),
            host_ports: HashSet::new(),
        }
    }

    /// Counts `pod` as running here.
    pub fn add(&mut self, pod: &Pod) {
        let (cpu, mem) = requests(pod);
        self.pods += 1;
        self.requested.0 += cpu;
        self.requested.1 += mem;
        if let Some(uid) = owner(pod) {
            *self.owners.entry(uid.to_string()).or_default() += 1;
        }
        self.host_ports.extend(host_ports(pod));
    }

    /// Stops counting `pod` here (a preemption victim, in a dry run). Sums never go below
    /// zero, so float rounding cannot make a node look emptier than it is.
    pub fn remove(&mut self, pod: &Pod) {
        let (cpu, mem) = requests(pod);
        self.pods = self.pods.saturating_sub(1);
        self.requested.0 = (self.requested.0 - cpu).max(0.0);
        self.requested.1 = (self.requested.1 - mem).max(0.0);
        if let Some(uid) = owner(pod) {
            if let Some(n) = self.owners.get_mut(uid) {
                *n = n.saturating_sub(1);
            }
        }
        for port in host_ports(pod) {
            self.host_ports.remove(&port);
        }
    }
}
