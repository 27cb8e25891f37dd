//! Each plugin of upstream's default profile against a real keelson-apiserver and
//! keelson-scheduler, driven by kubectl as a user would: where the Pods land, and for the
//! unschedulable case upstream's message in the Pod's PodScheduled condition.

mod common;

use common::{deployment, node, pod, zoned_nodes, Cluster};
use std::collections::BTreeSet;

const HOST: &str = "kubernetes.io/hostname";

#[test]
fn node_affinity_required_terms_and_preferred_weights() {
    let nodes = node("a", &[("disk", "ssd"), ("gen", "3")], "{}", "")
        + &node("b", &[("disk", "hdd"), ("gen", "5")], "{}", "")
        + &node("c", &[("disk", "hdd"), ("gen", "7")], "{}", "");
    let c = Cluster::start(&nodes, &[]);
    // Terms are ORed, a term's expressions ANDed; Gt compares integers.
    c.api.apply(&pod("gt", "{}", "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: disk, operator: In, values: [ssd]}, {key: gen, operator: Gt, values: ['4']}]},
    {matchExpressions: [{key: gen, operator: Gt, values: ['6']}]}]}}}\n"));
    assert_eq!(c.bound("gt"), "c");
    c.api.apply(&pod("by-name", "{}", "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchFields: [{key: metadata.name, operator: In, values: [b]}]}]}}}\n"));
    assert_eq!(c.bound("by-name"), "b");
    // Preferred: the heaviest matching term wins over the emptier nodes.
    c.api.apply(&pod(
        "prefers",
        "{}",
        "  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [
    {weight: 1, preference: {matchExpressions: [{key: disk, operator: In, values: [hdd]}]}},
    {weight: 50, preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}}]}}\n",
    ));
    assert_eq!(c.bound("prefers"), "a");
    c.api.apply(&pod("nowhere", "{}", "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [
    {matchExpressions: [{key: disk, operator: NotIn, values: [ssd, hdd]}]}]}}}\n"));
    assert_eq!(
        c.unschedulable("nowhere"),
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );
}

fn anti_affinity(app: &str, key: &str) -> String {
    format!(
        "      affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [
        {{labelSelector: {{matchLabels: {{app: {app}}}}}, topologyKey: {key}}}]}}}}\n"
    )
}

#[test]
fn fifty_pods_with_required_anti_affinity_never_share_a_node_and_the_rest_wait() {
    let c = Cluster::start(&zoned_nodes(60, 3), &[]);
    c.api
        .apply(&deployment("spread", 50, &anti_affinity("spread", HOST)));
    let placed = c.placed("app=spread", 50);
    let nodes: BTreeSet<&String> = placed.values().collect();
    assert_eq!(nodes.len(), 50, "pods shared a node: {placed:?}");
    // Three nodes, anti-affinity by zone: the fourth replica fits nowhere.
    let c = Cluster::start(&zoned_nodes(3, 3), &[]);
    c.api.apply(&pod(
        "z1",
        "{app: zonal}",
        &anti_affinity("zonal", "topology.kubernetes.io/zone")[4..],
    ));
    c.bound("z1");
    for name in ["z2", "z3"] {
        c.api.apply(&pod(
            name,
            "{app: zonal}",
            &anti_affinity("zonal", "topology.kubernetes.io/zone")[4..],
        ));
        c.bound(name);
    }
    c.api.apply(&pod(
        "z4",
        "{app: zonal}",
        &anti_affinity("zonal", "topology.kubernetes.io/zone")[4..],
    ));
    assert_eq!(
        c.unschedulable("z4"),
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
    // Symmetry: a Pod without terms is kept off the nodes whose Pods repel it.
    c.api.apply(&pod("plain", "{app: zonal}", ""));
    assert!(c.unschedulable("plain").starts_with(
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    ));
}

#[test]
fn pod_affinity_follows_its_group_into_a_zone_across_namespaces() {
    let c = Cluster::start(&zoned_nodes(6, 3), &[]);
    let follow = "  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [
    {labelSelector: {matchLabels: {app: db}}, topologyKey: topology.kubernetes.io/zone, namespaceSelector: {matchLabels: {team: data}}}]}}\n";
    c.api.apply(&pod("cache", "{app: cache}", follow));
    assert!(c
        .unschedulable("cache")
        .starts_with("0/6 nodes are available: 6 node(s) didn't match pod affinity rules."));
    c.api.kubectl_ok(&["create", "namespace", "data"]);
    c.api
        .kubectl_ok(&["label", "namespace", "data", "team=data"]);
    c.wait("the data namespace's ServiceAccount", || {
        c.api
            .kubectl(&["-n", "data", "get", "sa", "default"])
            .status
            .success()
    });
    let db = pod(
        "db",
        "{app: db}",
        "  nodeSelector: {kubernetes.io/hostname: n4}\n",
    );
    let applied = c
        .api
        .kubectl_stdin(&["-n", "data", "apply", "-f", "-"], &db);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    c.wait("db bound to n4", || {
        c.get(&["-n", "data", "pod", "db"], "{.spec.nodeName}") == "n4"
    });
    // n4 is in zone z1, with n1.
    let node = c.bound("cache");
    assert!(node == "n1" || node == "n4", "cache on {node}");
}

#[test]
fn topology_spread_six_replicas_over_three_zones_land_two_per_zone() {
    let c = Cluster::start(&zoned_nodes(9, 3), &[]);
    let spread = "      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n";
    c.api.apply(&deployment("web", 6, spread));
    let placed = c.placed("app=web", 6);
    let zone = |n: &str| format!("z{}", n[1..].parse::<usize>().unwrap() % 3);
    let per_zone = Cluster::count_by(&placed, zone);
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{placed:?}"
    );
    // minDomains 4 with 3 zones: the minimum counts as 0, so each zone holds one at most.
    let c = Cluster::start(&zoned_nodes(3, 3), &[]);
    let min = "  topologySpreadConstraints:
  - {maxSkew: 1, minDomains: 4, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: few}}}\n";
    for name in ["f1", "f2", "f3"] {
        c.api.apply(&pod(name, "{app: few}", min));
        c.bound(name);
    }
    c.api.apply(&pod("f4", "{app: few}", min));
    assert_eq!(
        c.unschedulable("f4"),
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
}

#[test]
fn default_spreading_places_a_services_pods_apart() {
    let c = Cluster::start(&zoned_nodes(3, 3), &[]);
    c.api
        .kubectl_ok(&["create", "service", "clusterip", "web", "--tcp=80:80"]);
    // One busy node: resources alone would put every Pod on the other two.
    c.api.apply(&pod(
        "busy",
        "{app: other}",
        "  nodeSelector: {kubernetes.io/hostname: n2}\n",
    ));
    c.bound("busy");
    c.api.apply(&deployment("web", 3, ""));
    let placed = c.placed("app=web", 3);
    let nodes: BTreeSet<&String> = placed.values().collect();
    assert_eq!(
        nodes.len(),
        3,
        "the Service's pods share a node: {placed:?}"
    );
}

#[test]
fn taints_prefer_no_schedule_and_tolerations() {
    let nodes = node(
        "spot",
        &[],
        "{taints: [{key: spot, value: 'yes', effect: PreferNoSchedule}]}",
        "",
    ) + &node(
        "gpu",
        &[],
        "{taints: [{key: gpu, value: 'yes', effect: NoSchedule}]}",
        "",
    ) + &node("plain", &[], "{}", "");
    let c = Cluster::start(&nodes, &[]);
    c.api.apply(&pod("p1", "{}", ""));
    assert_eq!(c.bound("p1"), "plain");
    // plain is now the busier node, yet the preference still keeps Pods off spot.
    c.api.apply(&pod("p2", "{}", ""));
    assert_eq!(c.bound("p2"), "plain");
    c.api.apply(&pod("tolerant", "{}", "  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]\n  nodeSelector: {kubernetes.io/hostname: gpu}\n"));
    assert_eq!(c.bound("tolerant"), "gpu");
}

#[test]
fn extended_resources_fit_and_run_out() {
    let nodes = node("g", &[], "{}", "example.com/gpu: '1'") + &node("c", &[], "{}", "");
    let c = Cluster::start(&nodes, &[]);
    let gpu = "  containers: [{name: c, image: busybox, resources: {requests: {example.com/gpu: '1'}, limits: {example.com/gpu: '1'}}}]\n";
    let first = pod("gpu-1", "{}", "").replace(
        "  containers: [{name: c, image: busybox, resources: {requests: {cpu: 10m, memory: 10Mi}}}]\n",
        gpu,
    );
    c.api.apply(&first);
    assert_eq!(c.bound("gpu-1"), "g");
    c.api.apply(&first.replace("gpu-1", "gpu-2"));
    assert_eq!(
        c.unschedulable("gpu-2"),
        "0/2 nodes are available: 2 Insufficient example.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
    );
}

#[test]
fn balanced_allocation_evens_cpu_and_memory() {
    let c = Cluster::start(&(node("a", &[], "{}", "") + &node("b", &[], "{}", "")), &[]);
    let sized = |name: &str, node: &str, cpu: &str, mem: &str| {
        pod(
            name,
            "{}",
            &format!("  nodeSelector: {{kubernetes.io/hostname: {node}}}\n"),
        )
        .replace(
            "cpu: 10m, memory: 10Mi",
            &format!("cpu: {cpu}, memory: {mem}"),
        )
    };
    c.api.apply(&sized("cpu-heavy", "a", "2", "1Gi"));
    c.api.apply(&sized("mem-heavy", "b", "500m", "4Gi"));
    c.bound("cpu-heavy");
    c.bound("mem-heavy");
    let mem = pod("mem", "{}", "").replace("cpu: 10m, memory: 10Mi", "cpu: 100m, memory: 2Gi");
    c.api.apply(&mem);
    assert_eq!(c.bound("mem"), "a");
}

#[test]
fn node_name_and_cordoned_nodes() {
    let c = Cluster::start(&(node("a", &[], "{}", "") + &node("b", &[], "{}", "")), &[]);
    c.api.kubectl_ok(&["cordon", "a"]);
    c.api.kubectl_ok(&["cordon", "b"]);
    c.api.apply(&pod("waits", "{}", ""));
    assert_eq!(
        c.unschedulable("waits"),
        "0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
    c.api.apply(&pod("tolerant", "{}", "  tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]\n"));
    c.bound("tolerant");
    // spec.nodeName bypasses the scheduler: no Scheduled event from it.
    c.api.apply(&pod("named", "{}", "  nodeName: b\n"));
    assert_eq!(c.node_of("named"), "b");
    let events = c.api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=named",
        "-o",
        "name",
    ]);
    assert!(
        events.trim().is_empty(),
        "scheduler touched a named pod: {events}"
    );
}

#[test]
fn scheduling_gates_hold_a_pod_until_the_last_is_removed() {
    let c = Cluster::start(&node("a", &[], "{}", ""), &[]);
    c.api.apply(&pod(
        "gated",
        "{}",
        "  schedulingGates: [{name: example.com/quota}, {name: example.com/approval}]\n",
    ));
    c.wait("kubectl shows SchedulingGated", || {
        c.api
            .kubectl_ok(&["get", "pod", "gated"])
            .contains("SchedulingGated")
    });
    let gate_path = "{.status.conditions[?(@.type==\"PodScheduled\")].reason}";
    assert_eq!(c.get(&["pod", "gated"], gate_path), "SchedulingGated");
    // A JSON patch of the gated Pod (its scheduling gates).
    let patch_gated = |patch: &str| {
        c.api
            .kubectl_cmd()
            .run(&["patch", "pod", "gated", "--type=json", "-p", patch])
    };
    patch_gated(r#"[{"op":"remove","path":"/spec/schedulingGates/0"}]"#).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(c.node_of("gated"), "", "bound with a gate left");
    // A gate cannot be added back.
    let late = r#"[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"late"}}]"#;
    assert!(patch_gated(late).is_err());
    patch_gated(r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#).unwrap();
    assert_eq!(c.bound("gated"), "a");
}

#[test]
fn preemption_evicts_the_pod_an_anti_affinity_repels() {
    let c = Cluster::start(&node("only", &[], "{}", ""), &[]);
    c.api.apply("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n");
    c.api.apply(&pod("low-db", "{app: db}", ""));
    c.bound("low-db");
    // Room is plenty; only the db Pod stands in the way of this one's anti-affinity.
    let repel = "  priorityClassName: high\n".to_string()
        + &anti_affinity("db", HOST)[4..].replace("\n        ", "\n    ");
    c.api.apply(&pod("high", "{app: web}", &repel));
    c.wait("low-db evicted", || {
        let deleting = c.get(&["pod", "low-db"], "{.metadata.deletionTimestamp}");
        !deleting.is_empty() || !c.api.kubectl(&["get", "pod", "low-db"]).status.success()
    });
    assert_eq!(
        c.get(&["pod", "high"], "{.status.nominatedNodeName}"),
        "only"
    );
}
