use super::*;
use framework::Unfit;

fn node(name: &str, ready: bool, cpu: &str, extra: serde_json::Value) -> NodeInfo {
    let mut n = serde_json::json!({
        "metadata": { "name": name, "labels": { "disk": if name == "n1" { "ssd" } else { "hdd" } } },
        "spec": {},
        "status": { "allocatable": { "cpu": cpu, "memory": "8Gi", "pods": "110" },
            "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
    });
    if let Some(spec) = extra.get("spec") {
        n["spec"] = spec.clone();
    }
    NodeInfo::new(Arc::new(serde_json::from_value(n).unwrap()))
}

fn info(p: &Pod) -> Arc<PodInfo> {
    Arc::new(PodInfo::new(Arc::new(p.clone())))
}

/// `schedule_one` under the default profile from node `start`.
fn pick_from(pod: &Pod, nodes: &[NodeInfo], start: usize) -> (Result<usize, Unfit>, usize) {
    let profile = Profile::default();
    let vols = volumes::PodVolumes::default();
    let cluster = Cluster::default();
    let cycle = Cycle::new(
        info(pod),
        &profile,
        &cluster,
        nodes,
        &mut crate::kept::Kept::default(),
        &vols,
        metrics::Timer::none(),
    );
    framework::schedule_one(&cycle, &cluster, nodes, start)
}

fn pod(cpu: &str, selector: Option<(&str, &str)>, owner: &str) -> Pod {
    let mut p = serde_json::json!({
        "metadata": { "name": "p", "namespace": "default", "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": true }] },
        "spec": { "containers": [{ "name": "c", "image": "busybox", "resources": { "requests": { "cpu": cpu } } }] },
    });
    if let Some((k, v)) = selector {
        p["spec"]["nodeSelector"] = serde_json::json!({ k: v });
    }
    serde_json::from_value(p).unwrap()
}

#[test]
fn filters_explain_why_no_node_fits() {
    let nodes = vec![
        node("n1", false, "4", serde_json::json!({})),
        node("n2", true, "1", serde_json::json!({})),
        node(
            "n3",
            true,
            "4",
            serde_json::json!({ "spec": { "taints": [{ "key": "gpu", "effect": "NoSchedule" }] } }),
        ),
    ];
    let err = pick(&pod("2", None, "o"), &nodes).unwrap_err();
    assert_eq!(err, "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: }, 1 node(s) were not ready. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling..");
}

#[test]
fn node_selector_and_resources_choose_the_node() {
    let nodes = vec![
        node("n1", true, "4", serde_json::json!({})),
        node("n2", true, "4", serde_json::json!({})),
    ];
    assert_eq!(pick(&pod("1", Some(("disk", "ssd")), "o"), &nodes), Ok(0));
    assert_eq!(pick(&pod("1", Some(("disk", "hdd")), "o"), &nodes), Ok(1));
    assert!(pick(&pod("1", Some(("disk", "nvme")), "o"), &nodes)
        .unwrap_err()
        .contains("2 node(s) didn't match Pod's node affinity/selector"));
}

#[test]
fn replicas_of_one_owner_spread_over_nodes() {
    let mut nodes = vec![
        node("n1", true, "4", serde_json::json!({})),
        node("n2", true, "4", serde_json::json!({})),
    ];
    // The ReplicaSet's selector gives the Pods upstream's default spreading constraints.
    let mut cluster = Cluster::default();
    cluster.controllers.insert(
        ("ReplicaSet".into(), "default".into(), "rs".into()),
        keelson_apimachinery::labels::LabelSelector::parse("app=web").unwrap(),
    );
    let mut placed = Vec::new();
    for _ in 0..4 {
        let mut p = pod("100m", None, "rs1");
        p.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        let i = pick_in(&p, &nodes, &cluster).unwrap();
        nodes[i].add(&info(&p));
        placed.push(i);
    }
    placed.sort();
    assert_eq!(placed, [0, 0, 1, 1]);
}

#[test]
fn pods_added_to_a_node_use_up_its_cpu_and_host_ports() {
    let mut nodes = vec![node("n1", true, "2", serde_json::json!({}))];
    nodes[0].add(&info(&pod("1500m", None, "a")));
    assert_eq!(
        pick(&pod("1", None, "b"), &nodes),
        Err("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..".into())
    );
    assert_eq!(pick(&pod("500m", None, "b"), &nodes), Ok(0));
    let mut web = pod("100m", None, "c");
    web.spec.as_mut().unwrap().containers[0].ports = Some(vec![serde_json::from_value(
        serde_json::json!({ "containerPort": 80, "hostPort": 8080 }),
    )
    .unwrap()]);
    nodes[0].add(&info(&web));
    assert_eq!(
        pick(&web, &nodes),
        Err("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..".into())
    );
}

#[test]
fn preemptions_verdict_ends_the_message_as_upstreams() {
    let mut nodes = vec![node("n1", true, "1", serde_json::json!({}))];
    nodes[0].add(&info(&pod("900m", None, "a")));
    let unfit = pick_from(&pod("500m", None, "b"), &nodes, 0).0.unwrap_err();
    assert_eq!(unfit.could_help, [0]);
    assert_eq!(
        unfit.message_with("not eligible due to preemptionPolicy=Never."),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
    );
    // Once it nominated a node, upstream reports the filters alone.
    assert_eq!(
        unfit.message_with(""),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
}

#[test]
fn tolerations_let_pods_onto_tainted_nodes() {
    let nodes = vec![node(
        "n1",
        true,
        "4",
        serde_json::json!({ "spec": { "taints": [{ "key": "gpu", "value": "yes", "effect": "NoSchedule" }] } }),
    )];
    let mut p = pod("1", None, "o");
    p.spec.as_mut().unwrap().tolerations = Some(vec![serde_json::from_value(serde_json::json!({ "key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule" })).unwrap()]);
    assert_eq!(pick(&p, &nodes), Ok(0));
}

#[test]
fn large_clusters_are_searched_in_part_as_upstream() {
    // Upstream's numFeasibleNodesToFind with the adaptive percentage.
    for (all, want) in [
        (5, 5),
        (99, 99),
        (100, 100),
        (1000, 420),
        (5000, 500),
        (6000, 300),
        (20000, 1000),
    ] {
        assert_eq!(feasible_nodes_to_find(all, 0), want, "{all} nodes");
    }
}

#[test]
fn each_search_starts_where_the_last_one_stopped() {
    let nodes: Vec<NodeInfo> = (0..200)
        .map(|i| node(&format!("n{i}"), true, "4", serde_json::json!({})))
        .collect();
    let (picked, looked) = pick_from(&pod("1", None, "o"), &nodes, 0);
    assert_eq!(looked, 100, "100 fitting nodes are enough out of 200");
    assert!(picked.unwrap() < 100);
    // Wrapping around the end: nodes 150..200 then 0..50.
    let (picked, looked) = pick_from(&pod("1", None, "o"), &nodes, 150);
    assert_eq!(looked, 100);
    let i = picked.unwrap();
    assert!(
        !(50..150).contains(&i),
        "picked node {i}, outside the nodes searched"
    );
    // Nothing fits: every node is looked at, and the message counts them all.
    let (picked, looked) = pick_from(&pod("8", None, "o"), &nodes, 150);
    assert_eq!(looked, 200);
    assert!(picked
        .unwrap_err()
        .message()
        .starts_with("0/200 nodes are available: 200 Insufficient cpu."));
}
