use super::*;
use crate::filter;
use crate::node_info::requests;
use serde_json::json;

fn node(cpu: &str) -> NodeInfo {
    NodeInfo::new(
        serde_json::from_value(json!({
            "metadata": { "name": "n" },
            "status": { "allocatable": { "cpu": cpu, "memory": "8Gi", "pods": "110" },
                "conditions": [{ "type": "Ready", "status": "True" }] },
        }))
        .unwrap(),
    )
}

fn pod(name: &str, cpu: &str, priority: i32, labels: serde_json::Value) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "default", "labels": labels },
            "spec": { "priority": priority,
                "containers": [{ "name": "c", "image": "busybox", "resources": { "requests": { "cpu": cpu } } }] },
        }))
        .unwrap(),
    )
}

/// `info` with `pods` counted on it.
fn with(mut info: NodeInfo, pods: &[Arc<Pod>]) -> NodeInfo {
    for p in pods {
        info.add(p);
    }
    info
}

fn budget(allowed: i32, app: &str) -> Budget {
    Budget::new(
        &serde_json::from_value(json!({
            "metadata": { "name": "pdb", "namespace": "default" },
            "spec": { "selector": { "matchLabels": { "app": app } } },
            "status": { "disruptionsAllowed": allowed, "currentHealthy": 0, "desiredHealthy": 0,
                "expectedPods": 0 },
        }))
        .unwrap(),
    )
    .unwrap()
}

fn victims_for(preemptor: &Pod, info: &NodeInfo, on: &[Arc<Pod>], b: &[Budget]) -> Option<Victims> {
    let req = requests(preemptor);
    select_victims(preemptor, info, on, b, &|n| {
        filter::unfit(preemptor, req, n).is_none()
    })
}

fn names(v: &Victims) -> Vec<&str> {
    v.pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect()
}

#[test]
fn only_as_many_lower_priority_pods_as_needed_are_victims() {
    let on = [
        pod("a", "300m", 1, json!({})),
        pod("b", "300m", 5, json!({})),
        pod("c", "300m", 3, json!({})),
    ];
    let info = with(node("1"), &on);
    // 500m needs two of the three gone; the most important (b, priority 5) is spared.
    let v = victims_for(&pod("p", "500m", 10, json!({})), &info, &on, &[]).unwrap();
    assert_eq!(names(&v), ["c", "a"]);
    assert_eq!(v.pdb_violations, 0);
}

#[test]
fn pods_of_equal_or_higher_priority_are_never_victims() {
    let on = [
        pod("a", "600m", 10, json!({})),
        pod("b", "300m", 1, json!({})),
    ];
    let info = with(node("1"), &on);
    // Removing b frees only 300m of the 500m needed; a has the preemptor's priority.
    assert!(victims_for(&pod("p", "500m", 10, json!({})), &info, &on, &[]).is_none());
    assert!(victims_for(&pod("p", "300m", 10, json!({})), &info, &on, &[]).is_some());
}

#[test]
fn budget_protected_pods_are_spared_when_others_will_do() {
    let on = [
        pod("guarded", "500m", 1, json!({ "app": "db" })),
        pod("free", "500m", 2, json!({ "app": "web" })),
    ];
    let info = with(node("1"), &on);
    let p = pod("p", "500m", 10, json!({}));
    // Without a budget the less important pod (guarded, priority 1) goes.
    assert_eq!(
        names(&victims_for(&p, &info, &on, &[]).unwrap()),
        ["guarded"]
    );
    // A budget allowing no disruption over it moves the choice to the other one.
    let v = victims_for(&p, &info, &on, &[budget(0, "db")]).unwrap();
    assert_eq!((names(&v), v.pdb_violations), (vec!["free"], 0));
    // When both must go, the violation is counted.
    let v = victims_for(
        &pod("p", "1", 10, json!({})),
        &info,
        &on,
        &[budget(0, "db")],
    )
    .unwrap();
    assert_eq!((names(&v), v.pdb_violations), (vec!["free", "guarded"], 1));
    // A budget with one disruption left covers one eviction, not two.
    let both = [
        pod("db-1", "500m", 1, json!({ "app": "db" })),
        pod("db-2", "500m", 1, json!({ "app": "db" })),
    ];
    let info = with(node("1"), &both);
    let v = victims_for(
        &pod("p", "1", 10, json!({})),
        &info,
        &both,
        &[budget(1, "db")],
    )
    .unwrap();
    assert_eq!(v.pdb_violations, 1);
}

#[test]
fn preemption_policy_never_is_not_eligible() {
    let mut p = (*pod("p", "1", 10, json!({}))).clone();
    assert_eq!(not_eligible(&p), None);
    p.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    assert_eq!(
        not_eligible(&p),
        Some("not eligible due to preemptionPolicy=Never.")
    );
}

fn victims(pdb_violations: usize, priorities: &[i32]) -> Victims {
    Victims {
        pods: priorities
            .iter()
            .map(|p| pod("v", "1", *p, json!({})))
            .collect(),
        pdb_violations,
    }
}

#[test]
fn node_choice_follows_upstreams_order() {
    // Fewest budget violations wins over everything else.
    assert_eq!(
        pick_node(&[victims(1, &[1]), victims(0, &[9, 9, 9])]),
        Some(1)
    );
    // Then the lowest most-important victim.
    assert_eq!(pick_node(&[victims(0, &[5]), victims(0, &[4, 4])]), Some(1));
    // Then the smallest sum of priorities (negative ones count as less).
    assert_eq!(
        pick_node(&[victims(0, &[5, 3]), victims(0, &[5, -2])]),
        Some(1)
    );
    // Then the fewest victims: the lowest priority adds nothing to the sum.
    assert_eq!(
        pick_node(&[victims(0, &[5, i32::MIN]), victims(0, &[5])]),
        Some(1)
    );
    // A full tie: the first.
    assert_eq!(pick_node(&[victims(0, &[5]), victims(0, &[5])]), Some(0));
    assert_eq!(pick_node(&[]), None);
}

#[test]
fn queue_puts_higher_priority_first_then_the_longest_waiting() {
    let created = |name: &str, priority: i32, at: &str| {
        let mut p = (*pod(name, "1", priority, json!({}))).clone();
        p.metadata.creation_timestamp = Some(serde_json::from_value(json!(at)).unwrap());
        p
    };
    let mut q = [
        created("low", 1, "2026-01-01T00:00:00Z"),
        created("high-later", 100, "2026-01-01T00:00:09Z"),
        created("high-first", 100, "2026-01-01T00:00:05Z"),
    ];
    q.sort_by(queue_order);
    let order: Vec<_> = q
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(order, ["high-first", "high-later", "low"]);
}
