//! A node and what its Pods (bound or assumed) add up to, and a Pod as the plugins read it.
//! Filters and scores read only these sums and the parsed Pods, so placing one Pod costs the
//! same whether a node holds 3 Pods or 100: a Pod's quantities and affinity terms are parsed
//! once, when its PodInfo is made, not once per candidate node.

use crate::affinity::Affinity;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use keelson_apimachinery::quantity;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Amounts of each resource: cpu in millicores, the rest in whole units (bytes, devices), as
/// upstream's framework.Resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Extended resources (`example.com/gpu`), hugepages and anything else a node reports.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    pub fn get(&self, name: &str) -> i64 {
        match name {
            "cpu" => self.milli_cpu,
            "memory" => self.memory,
            "ephemeral-storage" => self.ephemeral_storage,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    fn set(&mut self, name: &str, v: i64) {
        match name {
            "cpu" => self.milli_cpu = v,
            "memory" => self.memory = v,
            "ephemeral-storage" => self.ephemeral_storage = v,
            // A node's pod count is not a resource a Pod requests.
            "pods" => {}
            other => {
                self.scalar.insert(other.to_string(), v);
            }
        }
    }

    /// Resources from a quantity map (requests, limits, allocatable, overhead).
    pub fn from_map(
        map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Resources {
        let mut r = Resources::default();
        for (name, q) in map.into_iter().flatten() {
            let Some(v) = quantity::parse(&q.0) else {
                continue;
            };
            let v = if name == "cpu" { v * 1000.0 } else { v };
            r.set(name, v.ceil() as i64);
        }
        r
    }

    /// Each resource of `self` plus `sign` times that of `other`.
    pub fn add(&mut self, other: &Resources, sign: i64) {
        self.milli_cpu += sign * other.milli_cpu;
        self.memory += sign * other.memory;
        self.ephemeral_storage += sign * other.ephemeral_storage;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += sign * v;
        }
    }

    /// Each resource's larger amount.
    fn max(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// Upstream's defaults for scoring a container that requests no cpu or memory
/// (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest): such Pods still weigh something.
pub const DEFAULT_MILLI_CPU: i64 = 100;
pub const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// What one container requests; `non_zero` puts upstream's defaults in for cpu and memory
/// the container does not name.
fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let map = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = Resources::from_map(map);
    if non_zero {
        let named = |k: &str| map.is_some_and(|m| m.contains_key(k));
        if !named("cpu") {
            r.milli_cpu = DEFAULT_MILLI_CPU;
        }
        if !named("memory") {
            r.memory = DEFAULT_MEMORY;
        }
    }
    r
}

/// A Pod's requests as upstream's resource.PodRequests computes them: its containers plus its
/// sidecars (init containers with restartPolicy Always), or the largest init container if it
/// needs more (sidecars started before it count with it), plus spec.overhead.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(&container_requests(c, non_zero), 1);
    }
    let mut sidecars = Resources::default();
    let mut init = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c, non_zero);
        let needs = if c.restart_policy.as_deref() == Some("Always") {
            total.add(&r, 1);
            sidecars.add(&r, 1);
            sidecars.clone()
        } else {
            let mut with = r;
            with.add(&sidecars, 1);
            with
        };
        init.max(&needs);
    }
    total.max(&init);
    if let Some(overhead) = spec.overhead.as_ref() {
        total.add(&Resources::from_map(Some(overhead)), 1);
    }
    total
}

/// The host ports a Pod asks for, with their protocol.
pub fn host_ports(pod: &Pod) -> Vec<(i32, String)> {
    pod.spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            p.host_port
                .filter(|h| *h > 0)
                .map(|h| (h, p.protocol.clone().unwrap_or_else(|| "TCP".into())))
        })
        .collect()
}

/// A Pod as the plugins read it, parsed once.
#[derive(Debug)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    /// What the Pod requests (NodeResourcesFit's filter and BalancedAllocation).
    pub requests: Resources,
    /// cpu and memory with upstream's defaults for containers that name none (the scores).
    pub non_zero: (i64, i64),
    pub host_ports: Vec<(i32, String)>,
    pub affinity: Affinity,
    /// `template()`, made when first asked for: only Pods being scheduled need it.
    template: std::sync::OnceLock<String>,
}

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> PodInfo {
        let nz = pod_requests(&pod, true);
        PodInfo {
            requests: pod_requests(&pod, false),
            non_zero: (nz.milli_cpu, nz.memory),
            host_ports: host_ports(&pod),
            affinity: Affinity::of(&pod),
            template: std::sync::OnceLock::new(),
            pod,
        }
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// What the inter-pod and spreading states of its cycle depend on (namespace, labels,
    /// affinity, spreading constraints, node selection, tolerations, controller): Pods of
    /// one template share it, and a pass reuses the states it computed for the first of them.
    pub fn template(&self) -> &str {
        self.template.get_or_init(|| template(&self.pod))
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }
}

/// `PodInfo::template()`: everything of the Pod the plugins' PreFilter and PreScore read, except
/// its requests and ports (read per node, not kept).
fn template(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let controller = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (&o.api_version, &o.kind, &o.name));
    serde_json::json!([
        pod.metadata.namespace,
        pod.metadata.labels,
        controller,
        spec.map(|s| (&s.affinity, &s.node_selector, &s.tolerations)),
        spec.map(|s| &s.topology_spread_constraints),
    ])
    .to_string()
}

#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    pub name: String,
    /// Its Ready condition is True.
    pub ready: bool,
    /// spec.unschedulable (kubectl cordon).
    pub cordoned: bool,
    /// Whether it has NoSchedule or NoExecute taints, and PreferNoSchedule ones: most nodes
    /// have neither, and the taint plugins skip them without reading the Node.
    pub hard_taints: bool,
    pub soft_taints: bool,
    pub allocatable: Resources,
    /// The node's pods allocatable (0 when not reported: no limit).
    pub allowed_pods: i64,
    /// Summed requests of the Pods on the node.
    pub requested: Resources,
    /// Summed non-zero cpu and memory requests (the scores).
    pub non_zero_requested: (i64, i64),
    /// The Pods counted here, bound or assumed.
    pub pods: Vec<Arc<PodInfo>>,
    /// How many of them have affinity terms of any kind, and required anti-affinity terms.
    pub with_affinity: usize,
    pub with_required_anti: usize,
    pub host_ports: HashMap<(i32, String), usize>,
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl NodeInfo {
    pub fn new(node: Arc<Node>) -> NodeInfo {
        let status = node.status.as_ref();
        let alloc = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
        let allowed_pods = alloc
            .and_then(|m| m.get("pods"))
            .and_then(|q| quantity::parse(&q.0))
            .unwrap_or(0.0) as i64;
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
        let has = |f: fn(&str) -> bool| taints.unwrap_or_default().iter().any(|t| f(&t.effect));
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            hard_taints: has(|e| e == "NoSchedule" || e == "NoExecute"),
            soft_taints: has(|e| e == "PreferNoSchedule"),
            ready,
            cordoned: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
            allocatable: Resources::from_map(alloc),
            allowed_pods,
            node,
            requested: Resources::default(),
            non_zero_requested: (0, 0),
            pods: Vec::new(),
            with_affinity: 0,
            with_required_anti: 0,
            host_ports: HashMap::new(),
        }
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        self.node.metadata.labels.as_ref().unwrap_or(&NO_LABELS)
    }

    /// Counts `pod` as running here.
    pub fn add(&mut self, pod: &Arc<PodInfo>) {
        self.account(pod, 1);
        self.pods.push(pod.clone());
    }

    /// Stops counting `pod` here (a preemption victim, in a dry run, or a nomination given
    /// back). False when it was not counted here.
    pub fn remove(&mut self, pod: &Arc<PodInfo>) -> bool {
        let Some(k) = self.pods.iter().position(|p| Arc::ptr_eq(p, pod)) else {
            return false;
        };
        self.pods.swap_remove(k);
        self.account(pod, -1);
        true
    }

    fn account(&mut self, pod: &PodInfo, sign: i64) {
        self.requested.add(&pod.requests, sign);
        self.non_zero_requested.0 += sign * pod.non_zero.0;
        self.non_zero_requested.1 += sign * pod.non_zero.1;
        let step = |n: &mut usize| *n = n.saturating_add_signed(sign as isize);
        if !pod.affinity.is_empty() {
            step(&mut self.with_affinity);
        }
        if !pod.affinity.required_anti.is_empty() {
            step(&mut self.with_required_anti);
        }
        for port in &pod.host_ports {
            let n = self.host_ports.entry(port.clone()).or_default();
            step(n);
            if *n == 0 {
                self.host_ports.remove(port);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "p" }, "spec": spec }))
            .unwrap()
    }

    #[test]
    fn requests_count_sidecars_init_containers_and_overhead_as_upstream() {
        let p = pod(serde_json::json!({
            "containers": [{ "name": "a", "resources": { "requests": { "cpu": "500m", "memory": "1Gi", "example.com/gpu": "1" } } }],
            "initContainers": [
                { "name": "side", "restartPolicy": "Always", "resources": { "requests": { "cpu": "200m" } } },
                { "name": "big", "resources": { "requests": { "cpu": "2", "memory": "10Mi" } } },
            ],
            "overhead": { "cpu": "10m" },
        }));
        let r = pod_requests(&p, false);
        // The big init container runs beside the sidecar: 2000 + 200 > 500 + 200.
        assert_eq!(r.milli_cpu, 2210);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.get("example.com/gpu"), 1);
        // Scores give a container without requests upstream's defaults.
        let empty = pod(serde_json::json!({ "containers": [{ "name": "a" }] }));
        assert!(pod_requests(&empty, false).is_zero());
        let nz = pod_requests(&empty, true);
        assert_eq!(
            (nz.milli_cpu, nz.memory),
            (DEFAULT_MILLI_CPU, DEFAULT_MEMORY)
        );
    }
}
