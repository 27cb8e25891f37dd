//! metrics.k8s.io/v1beta1 through the machine's kubectl (`kubectl top`): the API server asks
//! each Ready node's agent for /stats/summary. The agent here is a fake: a TLS server that, like
//! keelson-agent, accepts only client certificates signed by the cluster CA, and answers what a
//! kubelet's Summary API would.

use keelson_testing::Apiserver;
use rustls::pki_types::PrivateKeyDer;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

/// A fake agent on 127.0.0.1 answering GET /stats/summary with `summary`; stops with the test.
fn fake_agent(ca_pem: &[u8], summary: String) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(ca.unwrap()).unwrap();
    }
    let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let key = PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(clients)
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, summary) = (config.clone(), summary.clone());
            std::thread::spawn(move || answer(config, tcp, &summary));
        }
    });
    port
}

/// One request, one answer, then close (the API server opens a connection per request).
fn answer(config: Arc<rustls::ServerConfig>, tcp: std::net::TcpStream, summary: &str) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tls.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let (code, body) = match head.starts_with("GET /stats/summary") {
        true => ("200 OK", summary),
        false => ("404 Not Found", "404 page not found"),
    };
    let resp = format!(
        "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(resp.as_bytes());
    let _ = tls.flush();
}

/// 250m CPU and 64Mi on the node; `web` (this pod's uid) uses 100m and 32Mi in `app`;
/// `gone` is a pod the agent still reports but the API no longer has.
fn summary(node: &str, web_uid: &str) -> String {
    let t = "2026-12-04T12:00:00Z";
    let container = |name: &str, nanos: u64, bytes: u64| {
        serde_json::json!({"name": name, "cpu": {"time": t, "usageNanoCores": nanos},
            "memory": {"time": t, "workingSetBytes": bytes}})
    };
    serde_json::json!({
        "node": {"nodeName": node,
            "cpu": {"time": t, "usageNanoCores": 250_000_000u64, "usageCoreNanoSeconds": 9u64},
            "memory": {"time": t, "workingSetBytes": 64u64 << 20, "availableBytes": 1u64 << 30}},
        "pods": [
            {"podRef": {"name": "web", "namespace": "default", "uid": web_uid},
             "containers": [container("app", 100_000_000, 32 << 20), container("sidecar", 5_000_000, 4 << 20)]},
            {"podRef": {"name": "gone", "namespace": "default", "uid": "0000"},
             "containers": [container("app", 1, 4096)]},
        ],
    })
    .to_string()
}

/// A Ready node whose agent listens on 127.0.0.1:`port`.
fn register_node(s: &Apiserver, name: &str, port: u16) {
    s.apply(&format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{pool: blue}}\n"
    ));
    let room = serde_json::json!({"cpu": "2", "memory": "2Gi", "pods": "110"});
    let status = serde_json::json!({
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "allocatable": room,
        "capacity": room,
    });
    s.kubectl_cmd().mark_node_ready(name, status).unwrap();
}

fn words(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// A server with node `n1` (its fake agent reporting `summary`) running pod default/web, and
/// `n2`, Ready on paper but with no agent listening.
fn cluster() -> Apiserver {
    let s = Apiserver::start();
    s.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  labels: {app: web}\nspec:\n  nodeName: n1\n  containers:\n  - {name: app, image: nginx}\n  - {name: sidecar, image: busybox}\n",
    );
    let uid = s.kubectl_ok(&["get", "pod", "web", "-o", "jsonpath={.metadata.uid}"]);
    let ca = std::fs::read(s.dir.path().join("ca.crt")).unwrap();
    let port = fake_agent(&ca, summary("n1", uid.trim()));
    register_node(&s, "n1", port);
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = closed.local_addr().unwrap().port();
    drop(closed);
    register_node(&s, "n2", dead_port);
    s
}

#[test]
fn kubectl_top_prints_what_the_agents_report() {
    let s = cluster();
    let resources = s.kubectl_ok(&["api-resources", "--api-group=metrics.k8s.io", "-o", "wide"]);
    for (plural, namespaced, kind) in [
        ("nodes", "false", "NodeMetrics"),
        ("pods", "true", "PodMetrics"),
    ] {
        let row = resources
            .lines()
            .find(|l| l.starts_with(&format!("{plural} ")))
            .unwrap_or_else(|| panic!("{resources}"));
        let w: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            w[..4],
            [plural, "metrics.k8s.io/v1beta1", namespaced, kind],
            "{resources}"
        );
        assert_eq!(w.get(4), Some(&"get,list"), "only get and list: {row}");
    }

    let nodes = s.kubectl_ok(&["top", "nodes"]);
    let rows = words(&nodes);
    // n2's agent does not answer: left out of the list, as metrics-server does, which kubectl
    // prints as <unknown>.
    assert_eq!(rows.len(), 3, "{nodes}");
    assert_eq!(rows[1], ["n1", "250m", "12%", "64Mi", "3%"], "{nodes}");
    assert_eq!(rows[2][..2], ["n2", "<unknown>"], "{nodes}");

    let pods = s.kubectl_ok(&["top", "pods", "-A"]);
    let rows = words(&pods);
    assert_eq!(rows.len(), 2, "only pods the API has: {pods}");
    assert_eq!(rows[1], ["default", "web", "105m", "36Mi"], "{pods}");

    let containers = s.kubectl_ok(&["top", "pods", "-n", "default", "--containers"]);
    let rows = words(&containers);
    assert_eq!(rows[1], ["web", "app", "100m", "32Mi"], "{containers}");
    assert_eq!(rows[2], ["web", "sidecar", "5m", "4Mi"], "{containers}");

    let unlabelled = s.kubectl(&["top", "pods", "-n", "default", "-l", "app=other"]);
    let err = String::from_utf8_lossy(&unlabelled.stderr);
    assert!(err.contains("No resources found"), "{err}");
}

#[test]
fn raw_answers_have_metrics_servers_shape_and_unknowns_are_not_found() {
    let s = cluster();
    let raw = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=pool%3Dblue",
    ]);
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "NodeMetricsList", "{raw}");
    assert_eq!(list["apiVersion"], "metrics.k8s.io/v1beta1", "{raw}");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{raw}");
    let n1 = &items[0];
    assert_eq!(n1["kind"], "NodeMetrics");
    assert_eq!(n1["metadata"]["name"], "n1");
    assert_eq!(n1["metadata"]["labels"]["pool"], "blue");
    assert_eq!(
        (n1["timestamp"].as_str(), n1["window"].as_str()),
        (Some("2026-12-04T12:00:00Z"), Some("10s"))
    );
    assert_eq!(
        n1["usage"],
        serde_json::json!({"cpu": "250m", "memory": "64Mi"})
    );

    let other = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=pool%3Dred",
    ]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&other).unwrap()["items"],
        serde_json::json!([])
    );

    let web = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web",
    ]);
    let web: serde_json::Value = serde_json::from_str(&web).unwrap();
    assert_eq!(
        (
            web["kind"].as_str(),
            web["metadata"]["labels"]["app"].as_str()
        ),
        (Some("PodMetrics"), Some("web"))
    );
    assert_eq!(
        web["containers"][0],
        serde_json::json!({"name": "app", "usage": {"cpu": "100m", "memory": "32Mi"}})
    );

    for (path, message) in [
        (
            "namespaces/default/pods/gone",
            r#"podmetrics.metrics.k8s.io "gone" not found"#,
        ),
        ("nodes/n2", r#"nodemetrics.metrics.k8s.io "n2" not found"#),
    ] {
        let out = s.kubectl(&[
            "get",
            "--raw",
            &format!("/apis/metrics.k8s.io/v1beta1/{path}"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("NotFound") && err.contains(message),
            "{path}: {err}"
        );
    }
    let listed = s.kubectl_ok(&["get", "podmetrics", "-n", "default", "-o", "name"]);
    assert_eq!(listed.trim(), "podmetrics.metrics.k8s.io/web");
    let top = s.kubectl(&["top", "pod", "nope"]);
    let err = String::from_utf8_lossy(&top.stderr);
    assert!(
        err.contains(r#"podmetrics.metrics.k8s.io "nope" not found"#),
        "{err}"
    );
}

#[test]
fn only_users_granted_metrics_may_read_them() {
    let s = cluster();
    let stranger = keelson_testing::Kubectl::new(s.kubeconfig_for("jane", &[]));
    let refused = stranger.output(&["top", "pods", "-n", "default"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && err.contains(
                r#"User "jane" cannot list resource "pods" in API group "metrics.k8s.io""#
            ),
        "{err}"
    );
    // view (and so edit and admin) carries upstream's aggregated metrics reader.
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "jane-view",
        "--clusterrole=view",
        "--user=jane",
        "-n",
        "default",
    ]);
    let pods = stranger.ok(&["top", "pods", "-n", "default"]);
    assert_eq!(words(&pods)[1], ["web", "105m", "36Mi"], "{pods}");
    let nodes = stranger.output(&["top", "nodes"]);
    assert!(
        !nodes.status.success(),
        "a RoleBinding grants no cluster-scoped nodes"
    );
    let path = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
    let posted = s.kubectl_stdin(&["create", "--raw", path, "-f", "-"], "{}");
    let err = String::from_utf8_lossy(&posted.stderr);
    assert!(
        err.contains("MethodNotAllowed"),
        "metrics are read-only: {err}"
    );
}
