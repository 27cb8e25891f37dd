//! Upstream scheduler_perf's workloads (test/integration/scheduler_perf: affinity/, misc/,
//! topology_spreading/), at their 5000Nodes sizes: the node labels, the namespaces, the Pods
//! created before the measurement (scheduled, not timed) and the Pods measured, from the same
//! templates (100m cpu and 500Mi each).

use serde_json::{json, Value};

/// A set of Pods of one template in one namespace.
pub struct Pods {
    pub namespace: String,
    pub count: usize,
    pub template: Value,
}

pub struct Workload {
    pub name: &'static str,
    pub nodes: usize,
    /// The labels of node `i` besides its hostname.
    pub node_labels: fn(usize) -> Value,
    /// Namespaces to create, with their labels.
    pub namespaces: Vec<(String, Value)>,
    pub init: Vec<Pods>,
    pub measure: Pods,
    /// Issue 36's target on these 2 cores (10x upstream's published minimum), pods/s.
    pub target: f64,
}

fn no_labels(_: usize) -> Value {
    json!({})
}

fn zone1(_: usize) -> Value {
    json!({ "topology.kubernetes.io/zone": "zone1" })
}

fn moons(i: usize) -> Value {
    json!({ "topology.kubernetes.io/zone": format!("moon-{}", i % 3 + 1) })
}

/// A Pod template: `labels` and `affinity`/spreading merged into its spec.
fn template(labels: Value, spec: Value) -> Value {
    let mut s = json!({ "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10",
        "ports": [{ "containerPort": 80 }],
        "resources": { "requests": { "cpu": "100m", "memory": "500Mi" },
            "limits": { "cpu": "100m", "memory": "500Mi" } } }] });
    s.as_object_mut()
        .unwrap()
        .extend(spec.as_object().cloned().unwrap_or_default());
    json!({ "metadata": { "labels": labels }, "spec": s })
}

fn term(color: &str, key: &str, namespaces: Value) -> Value {
    let mut t =
        json!({ "labelSelector": { "matchLabels": { "color": color } }, "topologyKey": key });
    t.as_object_mut()
        .unwrap()
        .extend(namespaces.as_object().cloned().unwrap_or_default());
    t
}

const SCHED_NS: &str = "[\"sched-1\", \"sched-0\"]";

fn sched_ns() -> Value {
    json!({ "namespaces": serde_json::from_str::<Value>(SCHED_NS).unwrap() })
}

pub fn default_pod() -> Value {
    template(json!({}), json!({}))
}

fn node_affinity() -> Value {
    template(
        json!({}),
        json!({ "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "topology.kubernetes.io/zone",
                "operator": "In", "values": ["zone1", "zone2"] }] }] } } } }),
    )
}

fn pod_affinity() -> Value {
    template(
        json!({ "color": "blue" }),
        json!({ "affinity": { "podAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
            term("blue", "topology.kubernetes.io/zone", sched_ns())] } } }),
    )
}

fn anti_affinity() -> Value {
    template(
        json!({ "color": "green" }),
        json!({ "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
            term("green", "kubernetes.io/hostname", sched_ns())] } } }),
    )
}

fn preferred(kind: &str, color: &str) -> Value {
    template(
        json!({ "color": color }),
        json!({ "affinity": { kind: { "preferredDuringSchedulingIgnoredDuringExecution": [
            { "weight": 1, "podAffinityTerm": term(color, "kubernetes.io/hostname", sched_ns()) }] } } }),
    )
}

fn anti_affinity_ns_selector() -> Value {
    template(
        json!({ "color": "green" }),
        json!({ "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
            term("green", "kubernetes.io/hostname",
                json!({ "namespaceSelector": { "matchLabels": { "team": "devops" } } }))] } } }),
    )
}

fn preferred_affinity() -> Value {
    preferred("podAffinity", "red")
}

fn preferred_anti_affinity() -> Value {
    preferred("podAntiAffinity", "yellow")
}

fn spreading(when: &str) -> Value {
    template(
        json!({ "color": "blue" }),
        json!({ "topologySpreadConstraints": [{ "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": when, "labelSelector": { "matchLabels": { "color": "blue" } } }] }),
    )
}

fn pods(namespace: &str, count: usize, template: Value) -> Pods {
    Pods {
        namespace: namespace.into(),
        count,
        template,
    }
}

/// Upstream's usual shape on 5000 nodes: the `init` Pods made in the first namespace, then the
/// `measure` Pods measured in the second.
fn init_then_measure(
    name: &'static str,
    node_labels: fn(usize) -> Value,
    [first, second]: [&str; 2],
    (init_count, init): (usize, Value),
    (measure_count, measure): (usize, Value),
    target: f64,
) -> Workload {
    Workload {
        name,
        nodes: 5000,
        node_labels,
        namespaces: vec![(first.into(), json!({})), (second.into(), json!({}))],
        init: vec![pods(first, init_count, init)],
        measure: pods(second, measure_count, measure),
        target,
    }
}

/// Every workload; `measure` overrides how many Pods are measured (0: upstream's number).
pub fn all(measure: usize) -> Vec<Workload> {
    let m = |upstream: usize| if measure > 0 { measure } else { upstream };
    let devops: Vec<(String, Value)> = (0..100)
        .map(|i| (format!("init-ns-{i}"), json!({ "team": "devops" })))
        .chain([("measure-ns-0".to_string(), json!({ "team": "devops" }))])
        .collect();
    let numbered = ["namespace-1", "namespace-2"];
    let sched = ["sched-0", "sched-1"];
    // The Pods made first and the Pods measured of one template.
    let alike = |name,
                 node_labels: fn(usize) -> Value,
                 namespaces,
                 init,
                 template: fn() -> Value,
                 target| {
        init_then_measure(
            name,
            node_labels,
            namespaces,
            (init, template()),
            (m(1000), template()),
            target,
        )
    };
    let mut all = vec![
        alike(
            "SchedulingBasic",
            no_labels,
            numbered,
            1000,
            default_pod,
            2000.0,
        ),
        alike(
            "SchedulingNodeAffinity",
            zone1,
            numbered,
            5000,
            node_affinity,
            2200.0,
        ),
        alike(
            "SchedulingPodAntiAffinity",
            no_labels,
            sched,
            1000,
            anti_affinity,
            600.0,
        ),
        alike(
            "SchedulingPodAffinity",
            zone1,
            sched,
            5000,
            pod_affinity,
            350.0,
        ),
        alike(
            "SchedulingPreferredPodAffinity",
            no_labels,
            sched,
            5000,
            preferred_affinity,
            900.0,
        ),
        alike(
            "SchedulingPreferredPodAntiAffinity",
            no_labels,
            sched,
            5000,
            preferred_anti_affinity,
            900.0,
        ),
        Workload {
            name: "MixedSchedulingBasePod",
            nodes: 5000,
            node_labels: zone1,
            namespaces: vec![
                ("sched-0".into(), json!({})),
                ("namespace-7".into(), json!({})),
            ],
            init: vec![
                pods("sched-0", 2000, default_pod()),
                pods("sched-0", 2000, pod_affinity()),
                pods("sched-0", 2000, anti_affinity()),
                pods("sched-0", 2000, preferred_affinity()),
                pods("sched-0", 2000, preferred_anti_affinity()),
            ],
            measure: pods("namespace-7", m(1000), default_pod()),
            target: 1400.0,
        },
        Workload {
            name: "SchedulingRequiredPodAntiAffinityWithNSSelector",
            nodes: 5000,
            node_labels: no_labels,
            init: (0..100)
                .map(|i| pods(&format!("init-ns-{i}"), 40, anti_affinity_ns_selector()))
                .collect(),
            namespaces: devops,
            measure: pods("measure-ns-0", m(1000), anti_affinity_ns_selector()),
            target: 240.0,
        },
    ];
    for (name, when) in [
        ("TopologySpreading", "DoNotSchedule"),
        ("PreferredTopologySpreading", "ScheduleAnyway"),
    ] {
        let measured = (m(2000), spreading(when));
        all.push(init_then_measure(
            name,
            moons,
            numbered,
            (5000, default_pod()),
            measured,
            1000.0,
        ));
    }
    all
}
