use super::{cell, meta, row};
use crate::tables::columns;
use serde_json::{json, Value};

fn pod(status: Value) -> Value {
    json!({"metadata": meta("web-0"), "spec": {"nodeName": "node-1",
        "containers": [{"name": "web", "image": "nginx"}, {"name": "side", "image": "busybox"}]},
        "status": status})
}
#[test]
fn running_pod_row() {
    let p = pod(
        json!({"phase": "Running", "podIPs": [{"ip": "10.244.0.5"}], "conditions": [
            {"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {"name": "web", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "side", "ready": false, "restartCount": 0, "state": {"running": {}}}]}),
    );
    let got = row("Pod", &p);
    let want = [
        ("NAME", json!("web-0")),
        ("READY", json!("1/2")),
        ("STATUS", json!("Running")),
        ("RESTARTS", json!("0")),
        ("AGE", json!("5m")),
        ("IP", json!("10.244.0.5")),
        ("NODE", json!("node-1")),
        ("NOMINATED NODE", json!("<none>")),
        ("READINESS GATES", json!("<none>")),
    ];
    let want: Vec<(String, Value)> = want.into_iter().map(|(c, v)| (c.to_string(), v)).collect();
    assert_eq!(got, want);
    let wide: Vec<i32> = columns("Pod").iter().map(|c| c.priority).collect();
    assert_eq!(wide, vec![0, 0, 0, 0, 0, 1, 1, 1, 1]);
}

#[test]
fn crash_loop_back_off_pod() {
    let p = pod(json!({"phase": "Running", "containerStatuses": [
        {"name": "web", "ready": false, "restartCount": 5,
         "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 2m40s"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
             "finishedAt": "2026-12-02T11:59:30Z"}}},
        {"name": "side", "ready": true, "restartCount": 0, "state": {"running": {}}}]}));
    assert_eq!(cell("Pod", &p, "STATUS"), "CrashLoopBackOff");
    assert_eq!(cell("Pod", &p, "READY"), "1/2");
    assert_eq!(cell("Pod", &p, "RESTARTS"), "5 (30s ago)");
    assert_eq!(cell("Pod", &p, "IP"), "<none>");
}

#[test]
fn restart_counts_past_i64_saturate() {
    // Written through /status by any client: the sum must not overflow while printing.
    let p = pod(json!({"phase": "Running", "containerStatuses": [
        {"name": "web", "ready": true, "restartCount": i64::MAX, "state": {"running": {}}},
        {"name": "side", "ready": true, "restartCount": 7, "state": {"running": {}}}]}));
    assert_eq!(cell("Pod", &p, "RESTARTS"), i64::MAX.to_string());
}

#[test]
fn terminating_pod() {
    let mut p = pod(json!({"phase": "Running", "containerStatuses": [
        {"name": "web", "ready": true, "state": {"running": {}}},
        {"name": "side", "ready": true, "state": {"running": {}}}]}));
    p["metadata"]["deletionTimestamp"] = json!("2026-12-02T11:59:50Z");
    assert_eq!(cell("Pod", &p, "STATUS"), "Terminating");
    assert_eq!(cell("Pod", &p, "READY"), "2/2");
    // A pod in a terminal phase shows the phase, not Terminating.
    p["status"]["phase"] = json!("Succeeded");
    assert_eq!(cell("Pod", &p, "STATUS"), "Succeeded");
    p["status"]["reason"] = json!("NodeLost");
    assert_eq!(cell("Pod", &p, "STATUS"), "Unknown");
}

#[test]
fn pod_status_reasons() {
    let waiting = |reason: &str| {
        pod(json!({"phase": "Pending", "containerStatuses": [
            {"name": "web", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}}]}))
    };
    assert_eq!(
        cell("Pod", &waiting("ErrImagePull"), "STATUS"),
        "ErrImagePull"
    );
    assert_eq!(
        cell("Pod", &waiting("ContainerCreating"), "STATUS"),
        "ContainerCreating"
    );
    let pending = pod(json!({"phase": "Pending"}));
    assert_eq!(cell("Pod", &pending, "STATUS"), "Pending");
    assert_eq!(cell("Pod", &pending, "READY"), "0/2");
    let done = pod(json!({"phase": "Succeeded", "containerStatuses": [
        {"name": "web", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "side", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
    assert_eq!(cell("Pod", &done, "STATUS"), "Completed");
    let killed = pod(json!({"phase": "Failed", "containerStatuses": [
        {"name": "web", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}));
    assert_eq!(cell("Pod", &killed, "STATUS"), "Signal:9");
    let exited = pod(json!({"phase": "Failed", "containerStatuses": [
        {"name": "web", "state": {"terminated": {"exitCode": 3}}}]}));
    assert_eq!(cell("Pod", &exited, "STATUS"), "ExitCode:3");
    let evicted = pod(json!({"phase": "Failed", "reason": "Evicted"}));
    assert_eq!(cell("Pod", &evicted, "STATUS"), "Evicted");
}

#[test]
fn init_container_states() {
    let with_init = |status: Value| {
        let mut p = pod(status);
        p["spec"]["initContainers"] =
            json!([{"name": "migrate", "image": "x"}, {"name": "warm", "image": "y"}]);
        p
    };
    let running = with_init(json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "migrate", "state": {"running": {}}}, {"name": "warm", "state": {"waiting": {"reason": "PodInitializing"}}}],
        "containerStatuses": [{"name": "web", "state": {"waiting": {"reason": "PodInitializing"}}}]}));
    assert_eq!(cell("Pod", &running, "STATUS"), "Init:0/2");
    let second = with_init(json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "warm", "state": {"running": {}}}]}));
    assert_eq!(cell("Pod", &second, "STATUS"), "Init:1/2");
    let failing = with_init(json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "migrate", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-12-02T11:58:00Z"}}}]}));
    assert_eq!(cell("Pod", &failing, "STATUS"), "Init:CrashLoopBackOff");
    assert_eq!(cell("Pod", &failing, "RESTARTS"), "3 (2m ago)");
    let failed = with_init(json!({"phase": "Failed", "initContainerStatuses": [
        {"name": "migrate", "state": {"terminated": {"exitCode": 2}}}]}));
    assert_eq!(cell("Pod", &failed, "STATUS"), "Init:ExitCode:2");
}

#[test]
fn sidecar_counts_as_a_container() {
    let mut p = pod(
        json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
        "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1,
            "state": {"running": {}}}],
        "containerStatuses": [
            {"name": "web", "ready": true, "state": {"running": {}}},
            {"name": "side", "ready": true, "state": {"running": {}}}]}),
    );
    p["spec"]["initContainers"] =
        json!([{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]);
    assert_eq!(cell("Pod", &p, "READY"), "3/3");
    assert_eq!(cell("Pod", &p, "STATUS"), "Running");
    assert_eq!(cell("Pod", &p, "RESTARTS"), "1");
}

#[test]
fn readiness_gates() {
    let mut p = pod(json!({"phase": "Running", "conditions": [
        {"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "False"}]}));
    p["spec"]["readinessGates"] = json!([{"conditionType": "example.com/lb"},
        {"conditionType": "example.com/dns"}]);
    assert_eq!(cell("Pod", &p, "READINESS GATES"), "1/2");
}
