use super::*;
use crate::config::Profile;
use crate::framework::{Cluster, Cycle};
use crate::metrics::Timer;
use crate::volumes::PodVolumes;
use serde_json::json;

fn node(cpu: &str) -> NodeInfo {
    NodeInfo::new(Arc::new(
        serde_json::from_value(json!({
            "metadata": { "name": "n", "labels": { "kubernetes.io/hostname": "n" } },
            "status": { "allocatable": { "cpu": cpu, "memory": "8Gi", "pods": "110" },
                "conditions": [{ "type": "Ready", "status": "True" }] },
        }))
        .unwrap(),
    ))
}

fn pod_with(
    name: &str,
    cpu: &str,
    priority: i32,
    labels: serde_json::Value,
    affinity: serde_json::Value,
) -> Arc<PodInfo> {
    Arc::new(PodInfo::new(Arc::new(
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "default", "labels": labels },
            "spec": { "priority": priority, "affinity": affinity,
                "containers": [{ "name": "c", "image": "busybox", "resources": { "requests": { "cpu": cpu } } }] },
        }))
        .unwrap(),
    )))
}

fn pod(name: &str, cpu: &str, priority: i32, labels: serde_json::Value) -> Arc<PodInfo> {
    pod_with(name, cpu, priority, labels, json!({}))
}

/// `info` with `pods` counted on it.
fn with(mut info: NodeInfo, pods: &[Arc<PodInfo>]) -> NodeInfo {
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

/// The victims on `info` for `preemptor`, with the default profile's filters.
fn victims_for(preemptor: &Arc<PodInfo>, info: &NodeInfo, b: &[Budget]) -> Option<Victims> {
    let profile = Profile::default();
    let vols = PodVolumes::default();
    let nodes = [info.clone()];
    let cluster = Cluster::default();
    let cycle = Cycle::new(
        preemptor.clone(),
        &profile,
        &cluster,
        &nodes,
        &mut crate::kept::Kept::default(),
        &vols,
        Timer::none(),
    );
    select_victims(&preemptor.pod, info, b, &|t| cycle.fits_without(info, t))
}

fn names(v: &Victims) -> Vec<&str> {
    v.pods
        .iter()
        .map(|p| p.pod.metadata.name.as_deref().unwrap())
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
    let v = victims_for(&pod("p", "500m", 10, json!({})), &info, &[]).unwrap();
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
    assert!(victims_for(&pod("p", "500m", 10, json!({})), &info, &[]).is_none());
    assert!(victims_for(&pod("p", "300m", 10, json!({})), &info, &[]).is_some());
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
    assert_eq!(names(&victims_for(&p, &info, &[]).unwrap()), ["guarded"]);
    // A budget allowing no disruption over it moves the choice to the other one.
    let v = victims_for(&p, &info, &[budget(0, "db")]).unwrap();
    assert_eq!((names(&v), v.pdb_violations), (vec!["free"], 0));
    // When both must go, the violation is counted.
    let v = victims_for(&pod("p", "1", 10, json!({})), &info, &[budget(0, "db")]).unwrap();
    assert_eq!((names(&v), v.pdb_violations), (vec!["free", "guarded"], 1));
    // A budget with one disruption left covers one eviction, not two.
    let both = [
        pod("db-1", "500m", 1, json!({ "app": "db" })),
        pod("db-2", "500m", 1, json!({ "app": "db" })),
    ];
    let info = with(node("1"), &both);
    let v = victims_for(&pod("p", "1", 10, json!({})), &info, &[budget(1, "db")]).unwrap();
    assert_eq!(v.pdb_violations, 1);
}

#[test]
fn preemption_policy_never_is_not_eligible() {
    let mut p = (*pod("p", "1", 10, json!({})).pod).clone();
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
        let mut p = (*pod(name, "1", priority, json!({})).pod).clone();
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

#[test]
fn anti_affinity_is_resolved_by_evicting_the_pods_it_repels() {
    let anti = json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": { "matchLabels": { "app": "db" } },
        "topologyKey": "kubernetes.io/hostname" }] } });
    let on = [
        pod("db-low", "100m", 1, json!({ "app": "db" })),
        pod("web", "100m", 1, json!({ "app": "web" })),
    ];
    let info = with(node("4"), &on);
    // Room is plenty: only the db Pod stands in the way, and only it goes.
    let p = pod_with("p", "100m", 10, json!({}), anti.clone());
    assert_eq!(names(&victims_for(&p, &info, &[]).unwrap()), ["db-low"]);
    // A db Pod as important as the preemptor cannot be evicted: no victims make it fit.
    let on = [pod("db-high", "100m", 10, json!({ "app": "db" }))];
    let info = with(node("4"), &on);
    assert!(victims_for(&p, &info, &[]).is_none());
    // Symmetry: an existing Pod's anti-affinity to the preemptor goes with that Pod.
    let on = [pod_with(
        "repeller",
        "100m",
        1,
        json!({}),
        json!({ "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": { "matchLabels": { "app": "web" } },
            "topologyKey": "kubernetes.io/hostname" }] } }),
    )];
    let info = with(node("4"), &on);
    let web = pod("p", "100m", 10, json!({ "app": "web" }));
    assert_eq!(names(&victims_for(&web, &info, &[]).unwrap()), ["repeller"]);
}
