//! The pod worker against the fake CRI runtime and a recording fake API server: the calls it
//! makes and the status it writes, without root or containerd.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use super::{Teardown, Worker};
use crate::cri_fake::FakeCri;
use crate::metrics::Metrics;
use crate::pod::context::Context;
use crate::pod::events::Recorder;
use crate::pod::translate::NodeSettings;
use crate::pod::volumes;

/// Requests the fake API server received: (method, path, body).
type Requests = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

/// A kube client whose server answers 404 to reads, echoes writes back, and records them.
fn fake_api() -> (kube::Client, Requests) {
    let requests: Requests = Arc::default();
    let log = requests.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let json: serde_json::Value =
                serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            log.lock()
                .unwrap()
                .push((method.clone(), path.clone(), json.clone()));
            let (code, answer) = if method == "GET" && path.ends_with("/secrets/regcred") {
                let config =
                    r#"{"auths": {"registry.test": {"username": "bob", "password": "pw"}}}"#;
                let data = k8s_openapi::ByteString(config.as_bytes().to_vec());
                (
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "regcred"},
                    "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": data}}),
                )
            } else if method == "GET" {
                (
                    404,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
                )
            } else {
                let mut pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}});
                if json.is_object() && json.get("kind").is_some() {
                    pod = json;
                }
                (200, pod)
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(bytes::Bytes::from(answer.to_string())))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), requests)
}

fn pod(policy: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "nodeName": "node-a",
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": "registry.test/app:1"}]
        }
    }))
    .unwrap()
}

/// A listed, empty Service store: containers get no link variables and wait for nothing.
fn no_services() -> crate::pod::service_env::ServiceLinks {
    crate::pod::service_env::ServiceLinks::from_store(keelson_daemon::Objects::of([]))
}

struct Fixture {
    cri: Arc<FakeCri>,
    requests: Requests,
    ctx: Arc<Context>,
    _root: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let cri = Arc::new(FakeCri::default());
    let (client, requests) = fake_api();
    let root = tempfile::tempdir().unwrap();
    let ctx = Arc::new(Context {
        cri: cri.clone(),
        events: Recorder::new(client.clone(), "node-a".into()),
        client,
        settings: NodeSettings {
            node_name: "node-a".into(),
            cgroup_root: "/keelson".into(),
            pod_log_root: root.path().join("logs").display().to_string(),
            cluster_dns: vec![],
            cluster_domain: "cluster.local".into(),
            security: Default::default(),
        },
        root: root.path().to_path_buf(),
        host_ip: "172.31.0.2".into(),
        metrics: Arc::new(Metrics::new()),
        pods: Default::default(),
        service_links: no_services(),
        tokens: Default::default(),
        evictions: Default::default(),
        shutting_down: Default::default(),
        static_pods: Default::default(),
        cgroups: Arc::new(crate::cgroups::QosCgroups::new(
            &root.path().join("cgroup"),
            "/keelson",
            Default::default(),
        )),
        pressure: tokio::sync::watch::channel(Default::default()).1,
    });
    Fixture {
        cri,
        requests,
        ctx,
        _root: root,
    }
}

fn worker(f: &Fixture) -> Worker {
    let (_tx, rx) = mpsc::channel(1);
    Worker::new("uid-1".into(), f.ctx.clone(), rx)
}

/// The pod statuses written (PATCH pods/web/status), in order.
/// The statuses written, as the API server holds them after each strategic merge patch
/// (its `$patch: replace` list directives applied).
fn statuses(requests: &Requests) -> Vec<serde_json::Value> {
    requests
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, p, _)| m == "PATCH" && p.ends_with("/pods/web/status"))
        .map(|(_, _, b)| {
            let mut status = b["status"].clone();
            for list in ["podIPs", "hostIPs"] {
                if let Some(items) = status[list].as_array_mut() {
                    items.retain(|i| i.get("$patch").is_none());
                }
            }
            status
        })
        .collect()
}

fn mutations(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| !c.starts_with("List"))
        .map(|c| c.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

#[tokio::test]
async fn new_pod_runs_and_reports_running() {
    let f = fixture();
    let mut w = worker(&f);
    w.sync(&pod("Always")).await.unwrap();
    let calls = mutations(&f.cri.take_calls());
    assert_eq!(
        calls,
        vec![
            "RunPodSandbox web",
            "PullImage registry.test/app:1",
            "CreateContainer app",
            "StartContainer c2"
        ],
        "sandbox, pull (IfNotPresent, image absent), create, start"
    );
    let written = statuses(&f.requests);
    assert_eq!(written.len(), 1, "one status write");
    let status = &written[0];
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["podIP"], "10.0.0.2");
    assert_eq!(status["hostIP"], "172.31.0.2");
    assert_eq!(status["containerStatuses"][0]["ready"], true);
    assert_eq!(
        status["containerStatuses"][0]["containerID"],
        "containerd://c2"
    );

    // The same state again: nothing to do, nothing written.
    let mut adopted = pod("Always");
    adopted.status = serde_json::from_value(status.clone()).ok();
    w.sync(&adopted).await.unwrap();
    assert!(mutations(&f.cri.take_calls()).is_empty());
    assert_eq!(statuses(&f.requests).len(), 1);
}

#[tokio::test]
async fn a_restarted_agent_adopts_what_runs() {
    let f = fixture();
    worker(&f).sync(&pod("Always")).await.unwrap();
    f.cri.take_calls();
    let first = statuses(&f.requests)[0].clone();
    let mut p = pod("Always");
    p.status = serde_json::from_value(first).ok();
    // A new worker (as after an agent restart) rebuilds its view from CRI labels.
    worker(&f).sync(&p).await.unwrap();
    assert!(
        mutations(&f.cri.take_calls()).is_empty(),
        "no container created or restarted"
    );
    assert_eq!(
        statuses(&f.requests).len(),
        1,
        "and no status write: nothing changed"
    );
    assert_eq!(f.cri.running_containers(), 1);
}

#[tokio::test]
async fn a_crashing_container_restarts_then_backs_off() {
    let f = fixture();
    let mut w = worker(&f);
    let p = pod("Always");
    w.sync(&p).await.unwrap();
    f.cri.take_calls();
    f.cri.exit("app", 1, 0);
    w.sync(&p).await.unwrap();
    assert_eq!(
        mutations(&f.cri.take_calls()),
        vec!["CreateContainer app", "StartContainer c3"],
        "first restart at once"
    );
    f.cri.exit("app", 1, 0);
    let wake = w.sync(&p).await.unwrap();
    let calls = mutations(&f.cri.take_calls());
    assert!(
        !calls.iter().any(|c| c.starts_with("CreateContainer")),
        "{calls:?}"
    );
    assert!(
        wake > Duration::from_secs(8) && wake <= Duration::from_secs(10),
        "woken when the 10 s back-off ends: {wake:?}"
    );
    let last = statuses(&f.requests).last().cloned().unwrap();
    let cs = &last["containerStatuses"][0];
    assert_eq!(cs["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(cs["restartCount"], 1);
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 1);
}

#[tokio::test]
async fn the_termination_message_is_reported() {
    let f = fixture();
    let mut w = worker(&f);
    let p = pod("Never");
    w.sync(&p).await.unwrap();
    let file = volumes::termination_log(&f.ctx.root, &p, "app", 0);
    assert!(
        file.exists(),
        "created before the container starts, to be mounted"
    );
    std::fs::write(&file, "disk full\n").unwrap();
    f.cri.exit("app", 2, 0);
    w.sync(&p).await.unwrap();
    let last = statuses(&f.requests).last().cloned().unwrap();
    let terminated = &last["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["message"], "disk full\n");
    assert_eq!(terminated["exitCode"], 2);
    assert_eq!(last["phase"], "Failed");
}

#[tokio::test]
async fn a_failed_pull_reports_err_image_pull_then_back_off() {
    let f = fixture();
    f.cri
        .missing_images
        .lock()
        .unwrap()
        .insert("registry.test/app:1".into());
    let mut w = worker(&f);
    let p = pod("Always");
    w.sync(&p).await.unwrap();
    let first = statuses(&f.requests).last().cloned().unwrap();
    assert_eq!(
        first["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ErrImagePull"
    );
    assert!(first["containerStatuses"][0]["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .contains("not found"));
    f.cri.take_calls();
    w.sync(&p).await.unwrap();
    assert!(
        !f.cri
            .take_calls()
            .iter()
            .any(|c| c.starts_with("PullImage")),
        "no pull during the back-off"
    );
    let second = statuses(&f.requests).last().cloned().unwrap();
    assert_eq!(
        second["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ImagePullBackOff"
    );
    assert_eq!(second["phase"], "Pending");
}

#[tokio::test]
async fn deletion_stops_everything_then_deletes_the_pod_with_grace_zero() {
    let f = fixture();
    let mut w = worker(&f);
    let mut p = pod("Always");
    w.sync(&p).await.unwrap();
    f.cri.take_calls();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    p.metadata.deletion_grace_period_seconds = Some(5);
    w.teardown(Some(&p), Teardown::Deleted).await.unwrap();
    assert_eq!(
        mutations(&f.cri.take_calls()),
        vec![
            "StopContainer c2",
            "StopPodSandbox sb1",
            "RemovePodSandbox sb1"
        ]
    );
    assert_eq!(f.cri.sandbox_count(), 0);
    let requests = f.requests.lock().unwrap();
    let delete = requests
        .iter()
        .find(|(m, _, _)| m == "DELETE")
        .expect("pod deleted");
    assert!(
        delete.1.ends_with("/namespaces/default/pods/web"),
        "{}",
        delete.1
    );
    assert_eq!(delete.2["gracePeriodSeconds"], 0);
    assert_eq!(delete.2["preconditions"]["uid"], "uid-1");
}

#[tokio::test]
async fn image_pull_secrets_authenticate_the_pull() {
    let f = fixture();
    let mut p = pod("Always");
    p.spec.as_mut().unwrap().image_pull_secrets =
        Some(vec![k8s_openapi::api::core::v1::LocalObjectReference {
            name: "regcred".into(),
        }]);
    worker(&f).sync(&p).await.unwrap();
    let calls = f.cri.take_calls();
    assert!(
        calls
            .iter()
            .any(|c| c == "PullImage registry.test/app:1 as bob"),
        "{calls:?}"
    );
}

/// A running pod of these containers (all of one image) with this grace period, then marked
/// deleted with the same grace.
async fn running_then_deleted(f: &Fixture, containers: serde_json::Value, grace: i64) -> Pod {
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1"},
        "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": grace, "containers": containers}
    }))
    .unwrap();
    worker(f).sync(&p).await.unwrap();
    assert_eq!(
        f.cri.running_containers(),
        p.spec.as_ref().unwrap().containers.len()
    );
    f.cri.take_calls();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    p.metadata.deletion_grace_period_seconds = Some(grace);
    p
}

/// The runtime calls that change something, with their arguments (StopContainer's timeout).
fn changes(f: &Fixture) -> Vec<String> {
    f.cri
        .take_calls()
        .into_iter()
        .filter(|c| !c.starts_with("List"))
        .collect()
}

fn position(calls: &[String], call: &str) -> usize {
    calls
        .iter()
        .position(|c| c == call)
        .unwrap_or_else(|| panic!("no {call:?} in {calls:?}"))
}

/// The reasons and messages of the events posted so far.
async fn events(requests: &Requests) -> Vec<(String, String)> {
    // Events are sent in the background.
    tokio::time::sleep(Duration::from_millis(50)).await;
    requests
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/events"))
        .map(|(_, _, b)| {
            let s = |k: &str| b[k].as_str().unwrap_or_default().to_string();
            (s("reason"), s("message"))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn deletion_runs_each_hook_before_its_stop_in_parallel_and_the_sandbox_last() {
    let f = fixture();
    let image = "registry.test/app:1";
    let p = running_then_deleted(
        &f,
        serde_json::json!([
            {"name": "slow", "image": image, "lifecycle": {"preStop": {"sleep": {"seconds": 3}}}},
            {"name": "quick", "image": image},
            {"name": "drain", "image": image, "lifecycle": {"preStop": {"exec": {"command": ["drain"]}}}}
        ]),
        30,
    )
    .await;
    let started = tokio::time::Instant::now();
    worker(&f)
        .teardown(Some(&p), Teardown::Deleted)
        .await
        .unwrap();
    // Containers are c2 (slow), c3 (quick), c4 (drain), in the sandbox sb1.
    let calls = changes(&f);
    assert_eq!(
        started.elapsed().as_secs(),
        3,
        "the hooks ran side by side: {calls:?}"
    );
    // The 3 s sleep comes off slow's grace period; the others get all of it.
    let slow = position(&calls, "StopContainer c2 27");
    let quick = position(&calls, "StopContainer c3 30");
    let drain = position(&calls, "StopContainer c4 30");
    assert!(position(&calls, "ExecSync c4 drain") < drain, "{calls:?}");
    assert!(
        quick < slow && drain < slow,
        "no container waits for another's hook: {calls:?}"
    );
    let sandbox = position(&calls, "StopPodSandbox sb1");
    assert!(
        slow < sandbox && quick < sandbox && drain < sandbox,
        "the network goes last: {calls:?}"
    );
    assert!(events(&f.requests)
        .await
        .iter()
        .all(|(reason, _)| reason != "FailedPreStopHook"));
}

#[tokio::test(start_paused = true)]
async fn a_failed_or_stuck_hook_is_reported_and_the_container_stopped_anyway() {
    let f = fixture();
    let image = "registry.test/app:1";
    f.cri.exec_answers.lock().unwrap().extend([
        ("fail".to_string(), (1, Duration::ZERO)),
        ("hang".to_string(), (0, Duration::from_secs(600))),
    ]);
    let p = running_then_deleted(
        &f,
        serde_json::json!([
            {"name": "failing", "image": image, "lifecycle": {"preStop": {"exec": {"command": ["fail"]}}}},
            {"name": "stuck", "image": image, "lifecycle": {"preStop": {"exec": {"command": ["hang"]}}}}
        ]),
        5,
    )
    .await;
    let started = tokio::time::Instant::now();
    worker(&f)
        .teardown(Some(&p), Teardown::Deleted)
        .await
        .unwrap();
    assert_eq!(
        started.elapsed().as_secs(),
        5,
        "the stuck hook is cut at the grace period"
    );
    let calls = changes(&f);
    let failing = position(&calls, "StopContainer c2 5");
    // Its hook used the whole grace period: it still gets the 2 s minimum.
    let stuck = position(&calls, "StopContainer c3 2");
    assert!(failing.max(stuck) < position(&calls, "StopPodSandbox sb1"));
    assert_eq!(f.cri.running_containers(), 0);
    let failed: Vec<String> = events(&f.requests)
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "FailedPreStopHook")
        .map(|(_, message)| message)
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed.contains(&"PreStopHook failed".to_string()),
        "{failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|m| m.contains("did not complete within the grace period of 5s")),
        "{failed:?}"
    );
}

/// An httpGet hook reaches its server, with the spec's path and headers, before the container
/// is stopped: the second the server takes comes off the grace period.
#[tokio::test]
async fn an_http_get_hook_is_sent_before_the_stop() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 2048];
        let n = conn.read(&mut buf).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        // Any answer will do, as for the kubelet's hooks: a 500 is not a failure.
        conn.write_all(b"HTTP/1.1 500 Busy\r\nContent-Length: 0\r\n\r\n")
            .await
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    let f = fixture();
    let hook = serde_json::json!({"httpGet": {"host": "127.0.0.1", "port": port, "path": "/drain",
        "httpHeaders": [{"name": "X-Drain", "value": "now"}]}});
    let p = running_then_deleted(
        &f,
        serde_json::json!([{"name": "app", "image": "registry.test/app:1", "lifecycle": {"preStop": hook}}]),
        10,
    )
    .await;
    worker(&f)
        .teardown(Some(&p), Teardown::Deleted)
        .await
        .unwrap();
    let seen = server.await.unwrap();
    assert!(seen.starts_with("GET /drain HTTP/1.1\r\n"), "{seen}");
    assert!(seen.contains("\r\nX-Drain: now\r\n"), "{seen}");
    let calls = changes(&f);
    assert!(
        position(&calls, "StopContainer c2 9") < position(&calls, "StopPodSandbox sb1"),
        "{calls:?}"
    );
    assert!(events(&f.requests)
        .await
        .iter()
        .all(|(reason, _)| reason != "FailedPreStopHook"));
}
