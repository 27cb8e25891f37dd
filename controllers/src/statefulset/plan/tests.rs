use super::*;
use serde_json::json;

fn sts(spec: serde_json::Value) -> StatefulSet {
    let mut base = json!({
        "replicas": 3,
        "selector": { "matchLabels": { "app": "db" } },
        "serviceName": "db",
        "template": { "metadata": { "labels": { "app": "db" } },
            "spec": { "containers": [{ "name": "c", "image": "i" }] } },
    });
    if let (Some(b), Some(s)) = (base.as_object_mut(), spec.as_object()) {
        b.extend(s.clone());
    }
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "default", "uid": "set-uid", "generation": 2 },
        "spec": base,
    }))
    .unwrap()
}

/// Pod `web-<ordinal>` of revision `rev`, in `phase`, Ready when `ready`.
fn pod(ordinal: i32, rev: &str, phase: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": format!("web-{ordinal}"), "namespace": "default",
            "labels": { "app": "db", "controller-revision-hash": rev } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": phase,
            "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
    }))
    .unwrap()
}

fn up(ordinal: i32, rev: &str) -> Pod {
    pod(ordinal, rev, "Running", true)
}

fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now(),
    ));
    p
}

fn run(set: &StatefulSet, current: &str, update: &str, pods: &[Pod]) -> Plan {
    let inputs = Inputs {
        sts: set,
        current,
        update,
        now: Timestamp::now(),
    };
    plan(&inputs, pods)
}

#[test]
fn ordered_ready_creates_the_next_ordinal_only_once_the_previous_is_running_and_ready() {
    let set = sts(json!({}));
    let p = run(&set, "r1", "r1", &[]);
    assert_eq!((p.create, p.claims), (vec![(0, true)], vec![0]));
    let pending = run(&set, "r1", "r1", &[pod(0, "r1", "Pending", false)]);
    assert!(pending.create.is_empty(), "{pending:?}");
    let running_not_ready = run(&set, "r1", "r1", &[pod(0, "r1", "Running", false)]);
    assert!(running_not_ready.create.is_empty());
    let p = run(&set, "r1", "r1", &[up(0, "r1")]);
    assert_eq!(p.create, vec![(1, true)]);
    assert_eq!(p.claims, vec![0, 1]);
    let all = run(&set, "r1", "r1", &[up(0, "r1"), up(1, "r1"), up(2, "r1")]);
    assert_eq!(
        all,
        Plan {
            claims: vec![0, 1, 2],
            status: all.status.clone(),
            ..Default::default()
        }
    );
    assert_eq!(all.status.ready_replicas, Some(3));
}

#[test]
fn parallel_creates_every_missing_ordinal_at_once() {
    let set = sts(json!({ "podManagementPolicy": "Parallel" }));
    let p = run(&set, "r1", "r1", &[pod(1, "r1", "Pending", false)]);
    assert_eq!(p.create, vec![(0, true), (2, true)]);
    assert_eq!(p.claims, vec![0, 1, 2]);
}

#[test]
fn scale_down_deletes_the_highest_ordinal_first_one_at_a_time() {
    let set = sts(json!({ "replicas": 1 }));
    let pods = [up(0, "r1"), up(1, "r1"), up(2, "r1")];
    assert_eq!(run(&set, "r1", "r1", &pods).delete, ["web-2"]);
    let pods = [up(0, "r1"), up(1, "r1"), terminating(up(2, "r1"))];
    assert!(run(&set, "r1", "r1", &pods).delete.is_empty());
    // Parallel deletes them all at once.
    let set = sts(json!({ "replicas": 1, "podManagementPolicy": "Parallel" }));
    let pods = [up(0, "r1"), up(1, "r1"), up(2, "r1")];
    assert_eq!(run(&set, "r1", "r1", &pods).delete, ["web-2", "web-1"]);
}

#[test]
fn ordered_scale_down_waits_for_unhealthy_replicas_not_for_unhealthy_condemned_pods() {
    let set = sts(json!({ "replicas": 1 }));
    // web-0 (kept) not ready: nothing is removed.
    let pods = [pod(0, "r1", "Running", false), up(1, "r1"), up(2, "r1")];
    assert!(run(&set, "r1", "r1", &pods).delete.is_empty());
    // Unhealthy condemned pods do not block their own removal, highest first.
    let pods = [up(0, "r1"), up(1, "r1"), pod(2, "r1", "Pending", false)];
    assert_eq!(run(&set, "r1", "r1", &pods).delete, ["web-2"]);
    let pods = [up(0, "r1"), pod(1, "r1", "Pending", false), up(2, "r1")];
    assert_eq!(run(&set, "r1", "r1", &pods).delete, ["web-2"]);
    let pods = [up(0, "r1"), pod(1, "r1", "Pending", false)];
    assert_eq!(run(&set, "r1", "r1", &pods).delete, ["web-1"]);
}

#[test]
fn rolling_update_replaces_the_highest_ordinal_down_to_the_partition() {
    let set = sts(
        json!({ "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": 1 } } }),
    );
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(1, "r1"), up(2, "r1")]);
    assert_eq!(p.delete, ["web-2"]);
    assert_eq!(
        (p.status.current_replicas, p.status.updated_replicas),
        (Some(3), Some(0))
    );
    // The replacement is not ready yet: wait.
    let pods = [up(0, "r1"), up(1, "r1"), pod(2, "r2", "Pending", false)];
    assert!(run(&set, "r1", "r2", &pods).delete.is_empty());
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(1, "r1"), up(2, "r2")]);
    assert_eq!(p.delete, ["web-1"]);
    // web-0 is below the partition: it stays, and the update revision is not yet current.
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(1, "r2"), up(2, "r2")]);
    assert!(p.delete.is_empty());
    assert_eq!(p.status.current_revision.as_deref(), Some("r1"));
    assert_eq!(
        (p.status.current_replicas, p.status.updated_replicas),
        (Some(1), Some(2))
    );
}

#[test]
fn a_missing_pod_below_the_partition_is_made_from_the_current_revision() {
    let set = sts(
        json!({ "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": 2 } } }),
    );
    let p = run(&set, "r1", "r2", &[up(1, "r1"), up(2, "r2")]);
    assert_eq!(p.create, vec![(0, false)]);
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(1, "r1")]);
    assert_eq!(p.create, vec![(2, true)]);
}

#[test]
fn once_every_pod_is_updated_and_ready_the_update_revision_becomes_current() {
    let set = sts(json!({}));
    let p = run(&set, "r1", "r2", &[up(0, "r2"), up(1, "r2"), up(2, "r2")]);
    assert_eq!(p.status.current_revision.as_deref(), Some("r2"));
    assert_eq!(p.status.update_revision.as_deref(), Some("r2"));
    assert_eq!(p.status.current_replicas, Some(3));
    assert_eq!(p.status.observed_generation, Some(2));
    let p = run(
        &set,
        "r1",
        "r2",
        &[up(0, "r2"), up(1, "r2"), pod(2, "r2", "Running", false)],
    );
    assert_eq!(p.status.current_revision.as_deref(), Some("r1"));
}

#[test]
fn on_delete_leaves_old_pods_and_makes_replacements_from_the_update_revision() {
    let set = sts(json!({ "updateStrategy": { "type": "OnDelete" } }));
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(1, "r1"), up(2, "r1")]);
    assert!(p.delete.is_empty());
    let p = run(&set, "r1", "r2", &[up(0, "r1"), up(2, "r1")]);
    assert_eq!(p.create, vec![(1, true)]);
}

#[test]
fn finished_pods_are_deleted_to_be_made_again() {
    let set = sts(json!({}));
    let p = run(
        &set,
        "r1",
        "r1",
        &[up(0, "r1"), pod(1, "r1", "Failed", false)],
    );
    assert_eq!(p.delete, ["web-1"]);
    assert!(p.create.is_empty());
    // While it terminates, the ordered set waits.
    let p = run(
        &set,
        "r1",
        "r1",
        &[up(0, "r1"), terminating(pod(1, "r1", "Failed", false))],
    );
    assert_eq!(
        p,
        Plan {
            claims: vec![0],
            status: p.status.clone(),
            ..Default::default()
        }
    );
}

#[test]
fn ordinals_start_at_spec_ordinals_start() {
    let set = sts(json!({ "replicas": 2, "ordinals": { "start": 5 } }));
    let p = run(&set, "r1", "r1", &[up(5, "r1"), up(0, "r1")]);
    assert_eq!(p.create, vec![(6, true)]);
    // web-0 is outside 5..7; it waits for web-6 to be ready (ordered).
    assert!(p.delete.is_empty());
    let p = run(&set, "r1", "r1", &[up(5, "r1"), up(6, "r1"), up(0, "r1")]);
    assert_eq!(p.delete, ["web-0"]);
}

#[test]
fn pods_not_named_after_an_ordinal_are_not_members() {
    let set = sts(json!({ "replicas": 1 }));
    let mut odd = up(1, "r1");
    odd.metadata.name = Some("web-01".into());
    let mut other = up(1, "r1");
    other.metadata.name = Some("webx-1".into());
    let p = run(&set, "r1", "r1", &[up(0, "r1"), odd, other]);
    assert!(p.delete.is_empty());
    assert_eq!(p.status.replicas, 1);
}

#[test]
fn min_ready_seconds_holds_the_next_ordinal_until_the_pod_is_available() {
    let set = sts(json!({ "minReadySeconds": 30 }));
    let mut fresh = up(0, "r1");
    let just_now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now());
    let conditions = fresh.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions[0].last_transition_time = Some(just_now);
    let p = run(&set, "r1", "r1", &[fresh.clone()]);
    assert!(p.create.is_empty(), "{p:?}");
    assert_eq!(
        (p.status.ready_replicas, p.status.available_replicas),
        (Some(1), Some(0))
    );
    let long_ago = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(60);
    fresh.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(long_ago),
    );
    let p = run(&set, "r1", "r1", &[fresh]);
    assert_eq!(p.create, vec![(1, true)]);
    assert_eq!(p.status.available_replicas, Some(1));
}
