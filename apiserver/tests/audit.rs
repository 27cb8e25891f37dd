//! The audit log (--audit-log-path): what kubectl and other clients do appears as one
//! audit.k8s.io/v1 Event per request, with the user, verb, object and response code,
//! refusals included.

use keelson_testing::{eventually, Apiserver};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The first event `matches` picks, waiting for the writer.
fn find(log: &Path, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
    eventually(what, Duration::from_secs(10), || {
        events(log)
            .into_iter()
            .find(|e| matches(e))
            .ok_or_else(|| format!("no such event in:\n{:#?}", events(log)))
    })
}

#[test]
fn requests_are_logged_with_user_verb_object_and_code() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("audit.log");
    let tokens = tmp.path().join("tokens.csv");
    std::fs::write(&tokens, "joiner-token,joiner,42,\"system:bootstrappers\"\n").unwrap();
    let s = Apiserver::start_with(&[
        "--audit-log-path",
        log.to_str().unwrap(),
        "--token-auth-file",
        tokens.to_str().unwrap(),
    ]);
    s.kubectl_ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    s.kubectl_ok(&["get", "pods"]);
    let (code, _) = s.curl(
        "GET",
        "/api/v1/namespaces/default/secrets",
        None,
        None,
        Some("joiner-token"),
    );
    assert_eq!(code, 403);
    let (code, _) = s.curl("GET", "/api/v1/pods", None, None, Some("wrong"));
    assert_eq!(code, 401);

    let create = find(&log, "the create", |e| e["verb"] == "create");
    assert_eq!(create["kind"], "Event");
    assert_eq!(create["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(create["level"], "Metadata");
    assert_eq!(create["stage"], "ResponseComplete");
    assert_eq!(create["user"]["username"], "keelson-admin");
    let groups = create["user"]["groups"].as_array().unwrap();
    assert!(groups.iter().any(|g| g == "system:masters"), "{create}");
    assert_eq!(
        create["objectRef"],
        serde_json::json!({"resource": "configmaps", "namespace": "default", "name": "settings", "apiVersion": "v1"})
    );
    assert_eq!(create["responseStatus"]["code"], 201);
    assert_eq!(
        create["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert_eq!(create["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert!(
        create["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("kubectl/"),
        "{create}"
    );
    assert!(!create["auditID"].as_str().unwrap().is_empty());
    let received = create["requestReceivedTimestamp"].as_str().unwrap();
    let done = create["stageTimestamp"].as_str().unwrap();
    assert!(
        received.ends_with('Z') && received <= done,
        "{received} {done}"
    );

    let list = find(&log, "the list", |e| {
        e["verb"] == "list" && e["objectRef"]["resource"] == "pods"
    });
    assert_eq!(
        list["requestURI"].as_str().unwrap().split('?').next(),
        Some("/api/v1/namespaces/default/pods")
    );
    assert_eq!(list["responseStatus"]["code"], 200);

    let refused = find(&log, "the 403", |e| e["user"]["username"] == "joiner");
    assert_eq!(refused["verb"], "list");
    assert_eq!(refused["objectRef"]["resource"], "secrets");
    assert_eq!(refused["responseStatus"]["code"], 403);
    assert_eq!(refused["responseStatus"]["reason"], "Forbidden");
    assert_eq!(refused["user"]["uid"], "42");
    assert_eq!(
        refused["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );

    let unauthenticated = find(&log, "the 401", |e| e["responseStatus"]["code"] == 401);
    assert_eq!(unauthenticated["stage"], "ResponseStarted");
    assert_eq!(unauthenticated["user"], serde_json::json!({}));
    assert_eq!(unauthenticated["requestURI"], "/api/v1/pods");
    assert!(
        unauthenticated.get("annotations").is_none(),
        "{unauthenticated}"
    );

    // Every event was written; none dropped.
    assert!(s.metric("apiserver_audit_event_total") >= 4.0);
    assert_eq!(s.metric("apiserver_audit_error_total"), 0.0);
}

#[test]
fn a_watch_is_logged_when_it_starts_and_when_it_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("audit.log");
    let s = Apiserver::start_with(&["--audit-log-path", log.to_str().unwrap()]);
    let path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1";
    let (code, _) = s.curl_admin("GET", path, None, None);
    assert_eq!(code, 200);
    let started = find(&log, "the watch's start", |e| {
        e["verb"] == "watch" && e["stage"] == "ResponseStarted"
    });
    let complete = find(&log, "the watch's end", |e| {
        e["verb"] == "watch" && e["stage"] == "ResponseComplete"
    });
    assert_eq!(started["auditID"], complete["auditID"]);
    assert_eq!(complete["responseStatus"]["code"], 200);
    assert!(complete["stageTimestamp"].as_str() >= started["stageTimestamp"].as_str());
}

#[test]
fn pod_security_findings_of_the_audit_level_go_to_the_event() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("audit.log");
    let s = Apiserver::start_with(&["--audit-log-path", log.to_str().unwrap()]);
    s.kubectl_ok(&["create", "namespace", "watched"]);
    s.kubectl_ok(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/audit=baseline",
    ]);
    s.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: watched}\nspec:\n  hostPID: true\n  containers: [{name: c, image: busybox}]\n");
    let create = find(&log, "the pod's create", |e| {
        e["verb"] == "create" && e["objectRef"]["resource"] == "pods"
    });
    let annotations = &create["annotations"];
    assert_eq!(
        annotations["pod-security.kubernetes.io/enforce-policy"],
        "privileged:latest"
    );
    assert_eq!(
        annotations["pod-security.kubernetes.io/audit-violations"],
        "would violate PodSecurity \"baseline:latest\": host namespaces (hostPID=true)"
    );
    assert_eq!(annotations["authorization.k8s.io/decision"], "allow");
}

#[test]
fn a_dash_writes_the_events_to_standard_output() {
    let s = Apiserver::start_with(&["--audit-log-path", "-"]);
    s.kubectl_ok(&["get", "namespaces"]);
    // The server's standard output and error go to its log; only events are JSON lines.
    let list = eventually("the list on stdout", Duration::from_secs(10), || {
        s.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["verb"] == "list" && e["objectRef"]["resource"] == "namespaces")
            .ok_or_else(|| s.log())
    });
    assert_eq!(list["kind"], "Event");
    assert_eq!(list["responseStatus"]["code"], 200);
}
