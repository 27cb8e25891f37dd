//! Each plugin's decisions on small clusters, under the default profile.

use crate::framework::Cluster;
use crate::node_info::{NodeInfo, PodInfo};
use crate::{pick, pick_in};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use std::sync::Arc;

/// A Ready node with 4 cpu, 8Gi and `labels` (its hostname label always), and `spec`.
fn node(name: &str, labels: Value, spec: Value) -> NodeInfo {
    let mut l = json!({ "kubernetes.io/hostname": name });
    l.as_object_mut()
        .unwrap()
        .extend(labels.as_object().unwrap().clone());
    NodeInfo::new(Arc::new(
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": l },
            "spec": spec,
            "status": { "allocatable": { "cpu": "4", "memory": "8Gi", "pods": "110", "example.com/gpu": "1" },
                "conditions": [{ "type": "Ready", "status": "True" }] },
        }))
        .unwrap(),
    ))
}

fn zones(n: usize) -> Vec<NodeInfo> {
    (0..n)
        .map(|i| {
            node(
                &format!("n{i}"),
                json!({ "topology.kubernetes.io/zone": format!("z{}", i % 3) }),
                json!({}),
            )
        })
        .collect()
}

/// A Pod in `default` with `labels` and `spec` merged over one small container.
fn pod(labels: Value, spec: Value) -> Pod {
    let mut s = json!({ "containers": [{ "name": "c", "image": "busybox",
        "resources": { "requests": { "cpu": "100m", "memory": "100Mi" } } }] });
    s.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "metadata": { "name": "p", "namespace": "default", "labels": labels },
        "spec": s,
    }))
    .unwrap()
}

fn place(nodes: &mut [NodeInfo], i: usize, p: &Pod) {
    nodes[i].add(&Arc::new(PodInfo::new(Arc::new(p.clone()))));
}

#[test]
fn required_node_affinity_ors_terms_and_ands_expressions() {
    let nodes = vec![
        node("a", json!({ "disk": "ssd", "gen": "3" }), json!({})),
        node("b", json!({ "disk": "hdd", "gen": "5" }), json!({})),
    ];
    let affinity = |terms: Value| {
        pod(
            json!({}),
            json!({ "affinity": { "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms } } } }),
        )
    };
    let gt4 = affinity(
        json!([{ "matchExpressions": [{ "key": "gen", "operator": "Gt", "values": ["4"] }] }]),
    );
    assert_eq!(pick(&gt4, &nodes), Ok(1));
    let by_name = affinity(
        json!([{ "matchFields": [{ "key": "metadata.name", "operator": "In", "values": ["a"] }] }]),
    );
    assert_eq!(pick(&by_name, &nodes), Ok(0));
    let none = affinity(json!([{ "matchExpressions": [
        { "key": "disk", "operator": "In", "values": ["ssd"] },
        { "key": "gen", "operator": "Gt", "values": ["4"] }] }]));
    assert_eq!(
        pick(&none, &nodes).unwrap_err(),
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
}

#[test]
fn preferred_node_affinity_weighs_the_choice() {
    let nodes = vec![
        node("a", json!({ "disk": "hdd" }), json!({})),
        node("b", json!({ "disk": "ssd" }), json!({})),
    ];
    let p = pod(
        json!({}),
        json!({ "affinity": { "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            { "weight": 10, "preference": { "matchExpressions": [{ "key": "disk", "operator": "In", "values": ["ssd"] }] } }] } } }),
    );
    assert_eq!(pick(&p, &nodes), Ok(1));
}

#[test]
fn prefer_no_schedule_taints_push_pods_elsewhere_unless_tolerated() {
    let taint =
        json!({ "taints": [{ "key": "spot", "value": "yes", "effect": "PreferNoSchedule" }] });
    let nodes = vec![node("a", json!({}), taint), node("b", json!({}), json!({}))];
    assert_eq!(pick(&pod(json!({}), json!({})), &nodes), Ok(1));
    // Tolerated, the taint costs nothing and the first node wins the tie.
    let tolerant = pod(
        json!({}),
        json!({ "tolerations": [{ "key": "spot", "operator": "Exists", "effect": "PreferNoSchedule" }] }),
    );
    assert_eq!(pick(&tolerant, &nodes), Ok(0));
}

#[test]
fn cordoned_nodes_take_only_pods_tolerating_unschedulable() {
    let nodes = vec![node("a", json!({}), json!({ "unschedulable": true }))];
    assert_eq!(
        pick(&pod(json!({}), json!({})), &nodes).unwrap_err(),
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
    );
    let tolerant = pod(
        json!({}),
        json!({ "tolerations": [{ "key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule" }] }),
    );
    assert_eq!(pick(&tolerant, &nodes), Ok(0));
}

#[test]
fn extended_resources_are_fitted_and_every_shortage_is_named() {
    let mut nodes = vec![node("a", json!({}), json!({}))];
    let gpu = |n: &str| {
        pod(
            json!({}),
            json!({ "containers": [{ "name": "c", "image": "x",
            "resources": { "requests": { "example.com/gpu": n, "cpu": "3" }, "limits": { "example.com/gpu": n } } }] }),
        )
    };
    assert_eq!(pick(&gpu("1"), &nodes), Ok(0));
    place(&mut nodes, 0, &gpu("1"));
    assert_eq!(
        pick(&gpu("1"), &nodes).unwrap_err(),
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient example.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
    );
    let other = pod(
        json!({}),
        json!({ "containers": [{ "name": "c", "image": "x",
        "resources": { "requests": { "example.com/fpga": "1" } } }] }),
    );
    assert!(pick(&other, &nodes)
        .unwrap_err()
        .contains("1 Insufficient example.com/fpga"));
}

fn anti(key: &str) -> Value {
    json!({ "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": { "matchLabels": { "app": "web" } }, "topologyKey": key }] } } })
}

#[test]
fn required_anti_affinity_keeps_replicas_apart_both_ways() {
    let mut nodes = zones(3);
    let web = pod(json!({ "app": "web" }), anti("kubernetes.io/hostname"));
    for _ in 0..3 {
        let i = pick(&web, &nodes).unwrap();
        assert!(
            nodes[i].pods.is_empty(),
            "two web pods on {}",
            nodes[i].name
        );
        place(&mut nodes, i, &web);
    }
    assert_eq!(
        pick(&web, &nodes).unwrap_err(),
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
    // Symmetry: a Pod without terms is kept away from Pods whose anti-affinity selects it.
    let plain = pod(json!({ "app": "web" }), json!({}));
    assert!(pick(&plain, &nodes).unwrap_err().starts_with(
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    ));
    // Other namespaces are not selected unless the term names them.
    let mut elsewhere = plain.clone();
    elsewhere.metadata.namespace = Some("other".into());
    assert!(pick(&elsewhere, &nodes).is_ok());
}

#[test]
fn required_affinity_follows_the_pods_it_selects_and_the_first_goes_anywhere() {
    let mut nodes = zones(6);
    let follower = pod(
        json!({ "app": "cache" }),
        json!({ "affinity": { "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": { "matchLabels": { "app": "web" } }, "topologyKey": "topology.kubernetes.io/zone" }] } } }),
    );
    // Nothing to follow, and it does not match its own term: it waits.
    assert!(pick(&follower, &nodes)
        .unwrap_err()
        .starts_with("0/6 nodes are available: 6 node(s) didn't match pod affinity rules."));
    place(&mut nodes, 4, &pod(json!({ "app": "web" }), json!({})));
    // Zone z1 holds n1 and n4: both qualify.
    let i = pick(&follower, &nodes).unwrap();
    assert!(i == 1 || i == 4, "placed on {}", nodes[i].name);
    // A Pod whose term selects itself may start the group anywhere.
    let selfish = pod(
        json!({ "app": "db" }),
        json!({ "affinity": { "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": { "matchLabels": { "app": "db" } }, "topologyKey": "topology.kubernetes.io/zone" }] } } }),
    );
    assert!(pick(&selfish, &nodes).is_ok());
}

#[test]
fn namespace_selector_and_match_label_keys_choose_the_pods_a_term_counts() {
    let mut nodes = zones(2);
    let mut cluster = Cluster::default();
    cluster
        .namespaces
        .insert("default".into(), Default::default());
    cluster.namespaces.insert(
        "team-a".into(),
        [("team".to_string(), "a".to_string())].into(),
    );
    let mut other = pod(json!({ "app": "web" }), json!({}));
    other.metadata.namespace = Some("team-a".into());
    place(&mut nodes, 0, &other);
    let repel = |ns_selector: Value| {
        pod(
            json!({ "app": "web" }),
            json!({ "affinity": { "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{ "namespaceSelector": ns_selector,
                "labelSelector": { "matchLabels": { "app": "web" } }, "topologyKey": "kubernetes.io/hostname" }] } } }),
        )
    };
    assert_eq!(
        pick_in(
            &repel(json!({ "matchLabels": { "team": "a" } })),
            &nodes,
            &cluster
        ),
        Ok(1)
    );
    // An empty namespaceSelector selects every namespace.
    assert_eq!(pick_in(&repel(json!({})), &nodes, &cluster), Ok(1));
    // matchLabelKeys: only Pods of the same version repel each other.
    let mut nodes = zones(2);
    place(
        &mut nodes,
        0,
        &pod(json!({ "app": "api", "v": "1" }), json!({})),
    );
    let v = |ver: &str| {
        pod(
            json!({ "app": "api", "v": ver }),
            json!({ "affinity": { "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{ "matchLabelKeys": ["v"],
                "labelSelector": { "matchLabels": { "app": "api" } }, "topologyKey": "kubernetes.io/hostname" }] } } }),
        )
    };
    assert_eq!(pick(&v("1"), &nodes), Ok(1));
    let mut full = zones(1);
    place(
        &mut full,
        0,
        &pod(json!({ "app": "api", "v": "1" }), json!({})),
    );
    assert_eq!(pick(&v("2"), &full), Ok(0));
    assert!(pick(&v("1"), &full).is_err());
}

fn spread(skew: i32, key: &str, when: &str, extra: Value) -> Value {
    let mut c = json!({ "maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": { "matchLabels": { "app": "web" } } });
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({ "topologySpreadConstraints": [c] })
}

#[test]
fn hard_spreading_keeps_zones_within_max_skew() {
    let mut nodes = zones(6);
    let web = pod(
        json!({ "app": "web" }),
        spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", json!({})),
    );
    let mut per_zone = [0; 3];
    for _ in 0..6 {
        let i = pick(&web, &nodes).unwrap();
        per_zone[i % 3] += 1;
        place(&mut nodes, i, &web);
    }
    assert_eq!(per_zone, [2, 2, 2]);
    // Nodes without the key cannot take the Pod at all.
    let bare = vec![node("x", json!({}), json!({}))];
    assert!(pick(&web, &bare).unwrap_err().starts_with(
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label)."
    ));
}

#[test]
fn min_domains_holds_pods_back_until_enough_domains_exist() {
    let mut nodes = zones(2);
    let web = pod(
        json!({ "app": "web" }),
        spread(
            1,
            "topology.kubernetes.io/zone",
            "DoNotSchedule",
            json!({ "minDomains": 3 }),
        ),
    );
    // Two zones of the three asked: the global minimum counts as 0, so each zone takes one.
    for _ in 0..2 {
        let i = pick(&web, &nodes).unwrap();
        place(&mut nodes, i, &web);
    }
    assert_eq!(
        pick(&web, &nodes).unwrap_err(),
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
    );
}

#[test]
fn node_affinity_policy_decides_which_domains_count() {
    // Zone z0 is off limits to the Pod; by default (Honor) it does not count, so z1 and z2
    // fill up evenly; with Ignore its zero holds the others to maxSkew.
    let mut nodes = zones(3);
    let selector = json!({ "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["z0"] }] }] } } } });
    let mut honor = pod(
        json!({ "app": "web" }),
        spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", json!({})),
    );
    let mut ignore = pod(
        json!({ "app": "web" }),
        spread(
            1,
            "topology.kubernetes.io/zone",
            "DoNotSchedule",
            json!({ "nodeAffinityPolicy": "Ignore" }),
        ),
    );
    for p in [&mut honor, &mut ignore] {
        p.spec.as_mut().unwrap().affinity =
            serde_json::from_value(selector["affinity"].clone()).unwrap();
    }
    for _ in 0..4 {
        let i = pick(&honor, &nodes).unwrap();
        place(&mut nodes, i, &honor);
    }
    assert!(
        pick(&ignore, &nodes).is_err(),
        "z0 empty, z1 and z2 at 2: skew 3 > 1"
    );
}

#[test]
fn soft_spreading_and_default_constraints_prefer_the_emptier_domain() {
    let mut nodes = zones(3);
    let web = pod(
        json!({ "app": "web" }),
        spread(1, "kubernetes.io/hostname", "ScheduleAnyway", json!({})),
    );
    place(&mut nodes, 0, &web);
    place(&mut nodes, 1, &web);
    // n2 is the busiest by resources, which alone would send the Pod elsewhere.
    let busy = pod(
        json!({}),
        json!({ "containers": [{ "name": "c", "image": "x", "resources": { "requests": { "cpu": "1" } } }] }),
    );
    place(&mut nodes, 2, &busy);
    assert_eq!(
        pick(&pod(json!({ "app": "other" }), json!({})), &nodes),
        Ok(0)
    );
    assert_eq!(pick(&web, &nodes), Ok(2));
    // Without constraints of its own, a Service's Pods are spread by upstream's defaults.
    let mut cluster = Cluster::default();
    cluster.services.insert(
        "default".into(),
        vec![[("app".to_string(), "web".to_string())].into()],
    );
    let plain = pod(json!({ "app": "web" }), json!({}));
    assert_eq!(pick_in(&plain, &nodes, &cluster), Ok(2));
}

#[test]
fn soft_zone_spreading_counts_every_node_of_a_domain() {
    // Zone a: a0 empty, a1 with two of the group; zone b: both empty. The Pod belongs in b,
    // although a0 (the first node of a) has none of the group.
    let zone = |z: &str| json!({ "topology.kubernetes.io/zone": z });
    let mut nodes = vec![
        node("a0", zone("a"), json!({})),
        node("a1", zone("a"), json!({})),
        node("b0", zone("b"), json!({})),
        node("b1", zone("b"), json!({})),
    ];
    let web = pod(
        json!({ "app": "web" }),
        spread(
            1,
            "topology.kubernetes.io/zone",
            "ScheduleAnyway",
            json!({}),
        ),
    );
    place(&mut nodes, 1, &web);
    place(&mut nodes, 1, &web);
    assert_eq!(pick(&web, &nodes), Ok(2));
}

#[test]
fn balanced_allocation_prefers_even_use_of_cpu_and_memory() {
    let mut nodes = vec![
        node("a", json!({}), json!({})),
        node("b", json!({}), json!({})),
    ];
    // a is cpu-heavy already, b memory-heavy; a memory-heavy Pod evens a out.
    place(
        &mut nodes,
        0,
        &pod(
            json!({}),
            json!({ "containers": [{ "name": "c", "image": "x", "resources": { "requests": { "cpu": "2", "memory": "1Gi" } } }] }),
        ),
    );
    place(
        &mut nodes,
        1,
        &pod(
            json!({}),
            json!({ "containers": [{ "name": "c", "image": "x", "resources": { "requests": { "cpu": "500m", "memory": "4Gi" } } }] }),
        ),
    );
    let mem = pod(
        json!({}),
        json!({ "containers": [{ "name": "c", "image": "x", "resources": { "requests": { "cpu": "100m", "memory": "2Gi" } } }] }),
    );
    assert_eq!(pick(&mem, &nodes), Ok(0));
}

#[test]
fn a_pod_naming_its_node_fits_only_there() {
    let nodes = zones(2);
    let p = pod(json!({}), json!({ "nodeName": "n1" }));
    let info = PodInfo::new(Arc::new(p));
    assert!(super::node_name(&info, &nodes[0]).is_err());
    assert!(super::node_name(&info, &nodes[1]).is_ok());
}
