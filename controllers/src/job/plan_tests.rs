//! The Job planner with a fake clock: pods are played by hand, time is a fixed Timestamp.

use super::*;
use k8s_openapi::api::core::v1::ContainerStatus;
use keelson_apimachinery::well_known::{JOB_COMPLETION_INDEX, JOB_TRACKING_FINALIZER};
use serde_json::json;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const T0: &str = "2026-01-01T00:00:00Z";

fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
    let mut spec_full = json!({
        "selector": { "matchLabels": { "batch.kubernetes.io/controller-uid": "j1" } },
        "template": { "metadata": { "labels": { "batch.kubernetes.io/controller-uid": "j1" } },
            "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } },
        "backoffLimit": 6, "completions": 1, "parallelism": 1, "completionMode": "NonIndexed",
    });
    for (k, v) in spec.as_object().unwrap() {
        spec_full[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": { "name": "pi", "namespace": "default", "uid": "j1" },
        "spec": spec_full,
        "status": status,
    }))
    .unwrap()
}

/// A pod of the Job, holding the finalizer, in `phase`, finished (when finished) at `end`.
fn pod(name: &str, phase: &str, end: &str, index: Option<i32>) -> Pod {
    let mut annotations = json!({});
    if let Some(i) = index {
        annotations[JOB_COMPLETION_INDEX] = json!(i.to_string());
    }
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("u-{name}"),
            "creationTimestamp": T0, "finalizers": [JOB_TRACKING_FINALIZER], "annotations": annotations },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": phase, "containerStatuses": [{ "name": "c", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": if phase == "Running" { json!({ "running": {} }) } else {
                json!({ "terminated": { "exitCode": if phase == "Succeeded" { 0 } else { 3 }, "finishedAt": end } }) } }] },
    }))
    .unwrap()
}

/// The plan after recording: the next pass sees the counts moved and finalizers gone.
fn settle(j: &mut Job, pods: &mut [Pod], p: &Plan) {
    j.status = Some(p.status.clone());
    for pod in pods.iter_mut() {
        if p.release.contains(&pod.name_any()) {
            pod.metadata.finalizers = Some(vec![]);
        }
    }
}

/// The pod's container statuses, to play its containers by hand.
fn containers(pod: &mut Pod) -> &mut [ContainerStatus] {
    let status = pod.status.as_mut().unwrap();
    status.container_statuses.as_deref_mut().unwrap()
}

/// The types of the plan's conditions, in order.
fn condition_types(p: &Plan) -> Vec<&str> {
    p.status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect()
}

/// The type, status and reason of the plan's last condition.
fn last_condition(p: &Plan) -> (&str, &str, Option<&str>) {
    let conditions = p.status.conditions.as_deref().unwrap_or_default();
    let c = conditions.last().expect("a condition");
    (c.type_.as_str(), c.status.as_str(), c.reason.as_deref())
}

#[test]
fn completions_five_parallelism_two_runs_two_at_a_time_until_five_succeed() {
    let mut j = job(json!({ "completions": 5, "parallelism": 2 }), json!({}));
    let now = t(T0);
    let p = plan(&j, &[], now);
    assert_eq!(p.create, vec![None, None]);
    assert_eq!(p.status.active, Some(2));
    assert_eq!(p.status.start_time, Some(Time(now)));
    j.status = Some(p.status.clone());
    // Three have succeeded, one runs: one more to start, not two.
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("p{i}"), "Succeeded", T0, None))
        .collect();
    pods.push(pod("p3", "Running", T0, None));
    let p = plan(&j, &pods, now);
    assert_eq!(p.create, vec![None]);
    let recorded = p.recorded.clone().unwrap();
    let uncounted = recorded.uncounted_terminated_pods.unwrap();
    assert_eq!(
        uncounted.succeeded.unwrap().len(),
        3,
        "recorded before release"
    );
    assert_eq!(p.release.len(), 3);
    assert_eq!(p.status.succeeded, Some(3));
    settle(&mut j, &mut pods, &p);
    // Counted pods are not counted again.
    let p = plan(&j, &pods, now);
    assert_eq!((p.status.succeeded, p.recorded.is_none()), (Some(3), true));
    pods.push(pod("p4", "Succeeded", T0, None));
    pods[3] = pod("p3", "Succeeded", T0, None);
    let p = plan(&j, &pods, now);
    assert_eq!(p.status.succeeded, Some(5));
    assert!(p.create.is_empty());
    assert_eq!(condition_types(&p), ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(p.status.completion_time, Some(Time(now)));
    assert_eq!(
        p.events,
        [(false, "Completed".to_string(), "Job completed".to_string())]
    );
}

#[test]
fn failures_back_off_then_stop_at_the_backoff_limit() {
    let mut j = job(
        json!({ "backoffLimit": 2 }),
        json!({ "startTime": T0, "failed": 0 }),
    );
    let mut pods = vec![pod("a", "Failed", "2026-01-01T00:00:05Z", None)];
    // 1 failure: 10 s after it, not before.
    let p = plan(&j, &pods, t("2026-01-01T00:00:10Z"));
    assert!(p.create.is_empty());
    assert_eq!(p.requeue, Some(Duration::from_secs(5)));
    settle(&mut j, &mut pods, &p);
    let p = plan(&j, &pods, t("2026-01-01T00:00:15Z"));
    assert_eq!(p.create, vec![None]);
    assert_eq!(p.status.failed, Some(1));
    // 2 failures: 20 s.
    pods.push(pod("b", "Failed", "2026-01-01T00:00:20Z", None));
    let p = plan(&j, &pods, t("2026-01-01T00:00:30Z"));
    assert_eq!(
        (p.create.len(), p.requeue),
        (0, Some(Duration::from_secs(10)))
    );
    settle(&mut j, &mut pods, &p);
    // The third failure passes backoffLimit 2: FailureTarget and Failed, one Warning.
    pods.push(pod("c", "Failed", "2026-01-01T00:01:00Z", None));
    let p = plan(&j, &pods, t("2026-01-01T00:01:01Z"));
    assert!(p.create.is_empty());
    let reasons: Vec<(&str, &str)> = p
        .status
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        reasons,
        [
            ("FailureTarget", "BackoffLimitExceeded"),
            ("Failed", "BackoffLimitExceeded")
        ]
    );
    assert_eq!(p.events[0].1, "BackoffLimitExceeded");
    assert_eq!(p.status.failed, Some(3));
}

#[test]
fn the_deadline_fails_the_job_and_deletes_running_pods_first() {
    let j = job(
        json!({ "activeDeadlineSeconds": 30 }),
        json!({ "startTime": T0 }),
    );
    let running = [pod("a", "Running", T0, None)];
    let p = plan(&j, &running, t("2026-01-01T00:00:10Z"));
    assert_eq!(p.requeue, Some(Duration::from_secs(20)));
    let p = plan(&j, &running, t("2026-01-01T00:00:30Z"));
    assert_eq!(p.delete, ["a"]);
    let types = condition_types(&p);
    assert_eq!(types, ["FailureTarget"], "Failed waits for the pod to end");
    let mut j2 = j.clone();
    j2.status = Some(p.status.clone());
    let mut gone = pod("a", "Running", T0, None);
    gone.metadata.deletion_timestamp = Some(Time(t("2026-01-01T00:00:30Z")));
    let p = plan(&j2, &[gone], t("2026-01-01T00:00:31Z"));
    assert_eq!(
        p.release,
        ["a"],
        "a deleted pod counts as failed and is let go"
    );
    let (type_, _, reason) = last_condition(&p);
    assert_eq!((type_, reason), ("Failed", Some("DeadlineExceeded")));
}

#[test]
fn indexed_jobs_run_each_missing_index_once() {
    let mut j = job(
        json!({ "completionMode": "Indexed", "completions": 4, "parallelism": 2 }),
        json!({}),
    );
    let p = plan(&j, &[], t(T0));
    assert_eq!(p.create, vec![Some(0), Some(1)]);
    j.status = Some(p.status.clone());
    let mut pods = vec![
        pod("x0", "Succeeded", T0, Some(0)),
        pod("x1", "Running", T0, Some(1)),
        pod("x1b", "Running", "", Some(1)),
    ];
    let p = plan(&j, &pods, t(T0));
    assert_eq!(p.delete, ["x1b"], "a second pod of index 1 goes");
    assert_eq!(p.create, vec![Some(2)]);
    assert_eq!(p.status.completed_indexes.as_deref(), Some("0"));
    settle(&mut j, &mut pods, &p);
    let pods: Vec<Pod> = (0..4)
        .map(|i| pod(&format!("y{i}"), "Succeeded", T0, Some(i)))
        .collect();
    let p = plan(&j, &pods, t(T0));
    assert_eq!(p.status.completed_indexes.as_deref(), Some("0-3"));
    assert!(p
        .status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Complete"));
}

#[test]
fn new_indexed_pods_carry_their_index() {
    let j = job(
        json!({ "completionMode": "Indexed", "completions": 3 }),
        json!({}),
    );
    let p = super::super::pods::new_pod(&j, Some(2));
    assert_eq!(p.metadata.generate_name.as_deref(), Some("pi-2-"));
    assert_eq!(p.annotations()[JOB_COMPLETION_INDEX], "2");
    assert_eq!(p.labels()[JOB_COMPLETION_INDEX], "2");
    assert_eq!(p.finalizers(), [JOB_TRACKING_FINALIZER]);
    let spec = p.spec.unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("pi-2"));
    let env = &spec.containers[0].env.as_ref().unwrap()[0];
    assert_eq!(env.name, "JOB_COMPLETION_INDEX");
}

#[test]
fn pod_failure_policy_fails_ignores_or_counts() {
    let policy = json!({ "podFailurePolicy": { "rules": [
        { "action": "FailJob", "onExitCodes": { "operator": "In", "values": [42] } },
        { "action": "Ignore", "onPodConditions": [{ "type": "DisruptionTarget" }] },
    ] } });
    let j = job(policy, json!({ "startTime": T0 }));
    let mut disrupted = pod("d", "Failed", T0, None);
    disrupted.status.as_mut().unwrap().conditions = Some(vec![serde_json::from_value(
        json!({ "type": "DisruptionTarget", "status": "True" }),
    )
    .unwrap()]);
    let p = plan(&j, &[disrupted], t("2026-01-01T00:10:00Z"));
    assert_eq!(p.status.failed, Some(0), "ignored: not counted");
    assert_eq!(p.release, ["d"]);
    assert_eq!(p.create, vec![None]);
    let mut exit42 = pod("e", "Failed", T0, None);
    containers(&mut exit42)[0]
        .state
        .as_mut()
        .unwrap()
        .terminated
        .as_mut()
        .unwrap()
        .exit_code = 42;
    let p = plan(&j, &[exit42], t("2026-01-01T00:10:00Z"));
    let failed = p.status.conditions.unwrap().pop().unwrap();
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    assert_eq!(failed.message.as_deref(),
        Some("Container c for pod default/e failed with exit code 42 matching FailJob rule at index 0"));
}

#[test]
fn finished_jobs_expire_after_their_ttl() {
    let j = job(
        json!({ "ttlSecondsAfterFinished": 60 }),
        json!({ "completionTime": T0, "conditions": [{ "type": "Complete", "status": "True" }] }),
    );
    assert_eq!(
        ttl_left(&j, t("2026-01-01T00:00:20Z")),
        Some(Duration::from_secs(40))
    );
    assert_eq!(
        ttl_left(&j, t("2026-01-01T00:05:00Z")),
        Some(Duration::ZERO)
    );
    let running = job(json!({ "ttlSecondsAfterFinished": 60 }), json!({}));
    assert_eq!(ttl_left(&running, t(T0)), None);
}

#[test]
fn suspending_deletes_the_pods_and_resuming_starts_the_clock_again() {
    let mut j = job(
        json!({ "suspend": true, "activeDeadlineSeconds": 60 }),
        json!({ "startTime": T0 }),
    );
    let running = [pod("a", "Running", T0, None)];
    let p = plan(&j, &running, t("2026-01-01T00:00:10Z"));
    assert_eq!(p.delete, ["a"]);
    assert!(p.create.is_empty());
    assert_eq!(p.status.start_time, None);
    assert_eq!(
        last_condition(&p),
        ("Suspended", "True", Some("JobSuspended"))
    );
    assert_eq!(p.events[0].1, "Suspended");
    j.status = Some(p.status.clone());
    let p = plan(&j, &[], t("2026-01-01T00:00:20Z"));
    assert!(p.events.is_empty(), "said once");
    j.spec.as_mut().unwrap().suspend = Some(false);
    j.status = Some(p.status.clone());
    let later = t("2026-01-01T00:05:00Z");
    let p = plan(&j, &[], later);
    assert_eq!(p.create, vec![None]);
    assert_eq!(
        p.status.start_time,
        Some(Time(later)),
        "the deadline counts from the resume"
    );
    let (_, status, reason) = last_condition(&p);
    assert_eq!((status, reason), ("False", Some("JobResumed")));
}

#[test]
fn on_failure_restarts_count_toward_the_backoff_limit() {
    let mut j = job(json!({ "backoffLimit": 2 }), json!({ "startTime": T0 }));
    j.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("OnFailure".into());
    let mut p1 = pod("a", "Running", T0, None);
    containers(&mut p1)[0].restart_count = 1;
    let p = plan(&j, std::slice::from_ref(&p1), t("2026-01-01T00:01:00Z"));
    assert!(p.status.conditions.is_none(), "one restart of two allowed");
    containers(&mut p1)[0].restart_count = 2;
    let p = plan(&j, &[p1], t("2026-01-01T00:01:00Z"));
    let target = p.status.conditions.unwrap().remove(0);
    assert_eq!(target.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(p.delete, ["a"]);
}
