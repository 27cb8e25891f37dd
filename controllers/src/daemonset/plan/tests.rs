use super::*;
use crate::daemonset::pod::new_pod;
use keelson_apimachinery::well_known::{NOT_READY_TAINT, POD_TEMPLATE_GENERATION_LABEL};
use serde_json::json;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn ds(strategy: serde_json::Value) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": { "name": "agent", "namespace": "kube-system", "uid": "ds-uid", "generation": 3 },
        "spec": {
            "selector": { "matchLabels": { "app": "agent" } },
            "updateStrategy": strategy,
            "template": {
                "metadata": { "labels": { "app": "agent" } },
                "spec": { "nodeSelector": { "role": "worker" }, "containers": [{ "name": "c", "image": "agent:1" }] },
            },
        },
    }))
    .unwrap()
}

fn node(name: &str, role: &str, taints: serde_json::Value) -> Node {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "role": role } },
        "spec": { "taints": taints },
    }))
    .unwrap()
}

/// Untainted nodes of role worker.
fn workers(names: &[&str]) -> Vec<Node> {
    names
        .iter()
        .map(|n| node(n, "worker", json!(null)))
        .collect()
}

/// A pod on `node` made by the planner's own template (`hash` of the current one, or "old").
fn pod(inputs: &Inputs, node: &str, name: &str, current: bool, ready: bool) -> Pod {
    let hash = if current { inputs.hash.as_str() } else { "old" };
    let mut p = new_pod(inputs.ds, &inputs.spec, hash, node);
    p.metadata.name = Some(name.into());
    p.status = serde_json::from_value(json!({
        "phase": "Running",
        "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": "2023-11-14T22:00:00Z" }],
    }))
    .unwrap();
    p
}

fn rolling(max_unavailable: serde_json::Value) -> serde_json::Value {
    json!({ "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": max_unavailable } })
}

#[test]
fn one_pod_per_selected_node_with_labels_owner_and_node() {
    let d = ds(rolling(json!(1)));
    let inputs = Inputs::new(&d, at(0));
    let (a, b, c) = (
        node("a", "worker", json!(null)),
        node("b", "worker", json!(null)),
        node("c", "edge", json!(null)),
    );
    let have = [pod(&inputs, "a", "agent-a", true, true)];
    let p = plan(&inputs, &[&a, &b, &c], &have);
    assert_eq!(p.create, ["b"]);
    assert!(p.delete.is_empty());
    let s = &p.status;
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready
        ),
        (2, 1, 1)
    );
    assert_eq!(
        (s.number_available, s.updated_number_scheduled),
        (Some(1), Some(1))
    );
    assert_eq!(
        (s.number_unavailable, s.observed_generation),
        (Some(1), Some(3))
    );

    let new = new_pod(&d, &inputs.spec, &inputs.hash, "b");
    assert_eq!(new.spec.as_ref().unwrap().node_name.as_deref(), Some("b"));
    assert_eq!(new.metadata.generate_name.as_deref(), Some("agent-"));
    let labels = new.metadata.labels.unwrap();
    assert_eq!(labels[CONTROLLER_REVISION_HASH_LABEL], inputs.hash);
    assert_eq!(labels[POD_TEMPLATE_GENERATION_LABEL], "3");
    assert_eq!(labels["app"], "agent");
    let owner = &new.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("DaemonSet", "ds-uid", Some(true))
    );
}

#[test]
fn daemon_pods_get_the_automatic_tolerations_without_seconds() {
    let d = ds(rolling(json!(1)));
    let inputs = Inputs::new(&d, at(0));
    let tolerations = inputs.spec.tolerations.clone().unwrap();
    let find = |key: &str| {
        tolerations
            .iter()
            .find(|t| t.key.as_deref() == Some(key))
            .unwrap()
    };
    let not_ready = find(NOT_READY_TAINT);
    assert_eq!(
        (
            not_ready.effect.as_deref(),
            not_ready.operator.as_deref(),
            not_ready.toleration_seconds
        ),
        (Some("NoExecute"), Some("Exists"), None)
    );
    assert_eq!(
        find("node.kubernetes.io/unschedulable").effect.as_deref(),
        Some("NoSchedule")
    );
    assert_eq!(
        find("node.kubernetes.io/disk-pressure").effect.as_deref(),
        Some("NoSchedule")
    );
    assert_eq!(
        tolerations.len(),
        6,
        "network-unavailable only for hostNetwork pods"
    );
}

#[test]
fn tainted_nodes_get_a_pod_only_when_tolerated() {
    let d = ds(rolling(json!(1)));
    let inputs = Inputs::new(&d, at(0));
    let unreachable = node(
        "u",
        "worker",
        json!([{ "key": "node.kubernetes.io/unreachable", "effect": "NoExecute" }]),
    );
    let gpu = node(
        "g",
        "worker",
        json!([{ "key": "gpu", "value": "yes", "effect": "NoSchedule" }]),
    );
    let soft = node(
        "s",
        "worker",
        json!([{ "key": "gpu", "effect": "PreferNoSchedule" }]),
    );
    let p = plan(&inputs, &[&unreachable, &gpu, &soft], &[]);
    assert_eq!(p.create, ["u", "s"]);
}

#[test]
fn pods_where_they_should_not_be_are_deleted_and_counted_misscheduled() {
    let d = ds(rolling(json!(1)));
    let inputs = Inputs::new(&d, at(0));
    let (a, c) = (
        node("a", "worker", json!(null)),
        node("c", "edge", json!(null)),
    );
    let mut failed = pod(&inputs, "a", "agent-failed", true, false);
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let have = [
        pod(&inputs, "a", "agent-a1", true, true),
        pod(&inputs, "a", "agent-a2", true, true),
        failed,
        pod(&inputs, "c", "agent-c", true, true),
        pod(&inputs, "gone", "agent-gone", true, true),
    ];
    let mut p = plan(&inputs, &[&a, &c], &have);
    p.delete.sort();
    assert_eq!(
        p.delete,
        ["agent-a2", "agent-c", "agent-failed", "agent-gone"]
    );
    assert!(p.create.is_empty());
    assert_eq!(
        (
            p.status.number_misscheduled,
            p.status.desired_number_scheduled
        ),
        (1, 1)
    );
}

#[test]
fn rolling_update_replaces_at_most_max_unavailable_at_a_time() {
    let d = ds(rolling(json!(1)));
    let inputs = Inputs::new(&d, at(0));
    let nodes = workers(&["a", "b", "c"]);
    let refs: Vec<&Node> = nodes.iter().collect();
    let old: Vec<Pod> = ["a", "b", "c"]
        .iter()
        .map(|n| pod(&inputs, n, &format!("old-{n}"), false, true))
        .collect();
    let p = plan(&inputs, &refs, &old);
    assert_eq!(p.delete, ["old-a"]);
    assert_eq!(p.status.updated_number_scheduled, Some(0));

    // Node a is replacing (no pod yet): nothing more goes until it is available again.
    let p = plan(&inputs, &refs, &old[1..]);
    assert_eq!(
        (p.create.clone(), p.delete.clone()),
        (vec!["a".to_string()], vec![])
    );
    let mut pods = vec![pod(&inputs, "a", "new-a", true, false)];
    pods.extend_from_slice(&old[1..]);
    assert!(
        plan(&inputs, &refs, &pods).delete.is_empty(),
        "new-a is not ready yet"
    );
    pods[0] = pod(&inputs, "a", "new-a", true, true);
    assert_eq!(plan(&inputs, &refs, &pods).delete, ["old-b"]);
}

#[test]
fn a_percentage_rounds_up_and_unavailable_old_pods_go_at_once() {
    let d = ds(rolling(json!("50%")));
    let inputs = Inputs::new(&d, at(0));
    let nodes = workers(&["a", "b", "c"]);
    let refs: Vec<&Node> = nodes.iter().collect();
    let old = [
        pod(&inputs, "a", "old-a", false, true),
        pod(&inputs, "b", "old-b", false, true),
        pod(&inputs, "c", "old-c", false, false),
    ];
    // 50% of 3 is 2 (rounded up): old-c is down already, so it goes and one available goes too.
    let p = plan(&inputs, &refs, &old);
    assert_eq!(p.delete, ["old-a", "old-c"]);
}

#[test]
fn on_delete_leaves_old_pods_alone() {
    let d = ds(json!({ "type": "OnDelete" }));
    let inputs = Inputs::new(&d, at(0));
    let a = node("a", "worker", json!(null));
    let p = plan(&inputs, &[&a], &[pod(&inputs, "a", "old-a", false, true)]);
    assert!(p.delete.is_empty() && p.create.is_empty());
    assert_eq!(p.status.updated_number_scheduled, Some(0));
}

#[test]
fn min_ready_seconds_delays_availability() {
    let mut d = ds(rolling(json!(1)));
    d.spec.min_ready_seconds = Some(30);
    // Ready since 2023-11-14T22:00:00Z = at(-800).
    let early = Inputs::new(&d, at(-780));
    let a = node("a", "worker", json!(null));
    let have = [pod(&early, "a", "agent-a", true, true)];
    assert_eq!(plan(&early, &[&a], &have).status.number_available, Some(0));
    let later = Inputs::new(&d, at(-760));
    assert_eq!(plan(&later, &[&a], &have).status.number_available, Some(1));
}
