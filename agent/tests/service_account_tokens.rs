//! Projected service-account tokens with a real containerd, keelson-apiserver and kubectl: a pod
//! reads token, ca.crt and namespace at /var/run/secrets/kubernetes.io/serviceaccount; the
//! token is the pod's own (it authenticates as the service account, bound to the pod) and is
//! renewed before it expires, each renewal swapping the files at once; a pod whose account
//! does not exist yet waits with a FailedMount event and starts once it is made.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Busybox sleeping, with the default token volume (from admission) and a second one whose
/// token lives 10 s, so it is renewed after 8 s.
fn pod(name: &str, node: &str, namespace: &str) -> String {
    let body = format!(
        "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"3600\"]\n    volumeMounts: [{{name: short, mountPath: /short}}]\n  volumes:\n  - name: short\n    projected:\n      sources:\n      - serviceAccountToken: {{path: token, expirationSeconds: 10}}\n"
    );
    pod_yaml(name, node, &body).replace(
        "metadata:\n",
        &format!("metadata:\n  namespace: {namespace}\n"),
    )
}

/// Runs `cat path` in the pod's container.
fn read(cluster: &Cluster, container_id: &str, path: &str) -> String {
    let out = cluster.exec(container_id, &["cat", path]);
    assert_eq!(
        out.exit_code,
        0,
        "cat {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Who the API server says `token` is (`kubectl auth whoami`).
fn whoami(cluster: &Cluster, token: &str) -> String {
    let path = "jsonpath={.status.userInfo.username}";
    cluster
        .kubectl(&["--token", token, "auth", "whoami", "-o", path])
        .unwrap()
}

fn claims(token: &str) -> Value {
    // base64url without padding, as standard base64.
    let part = token.split('.').nth(1).expect("a JWT");
    let mut text = part.replace('-', "+").replace('_', "/");
    while !text.len().is_multiple_of(4) {
        text.push('=');
    }
    let bytes = keelson_apimachinery::base64::decode(&text).expect("base64url");
    serde_json::from_slice(&bytes).unwrap()
}

fn running_container(cluster: &Cluster, name: &str, namespace: &str) -> String {
    cluster.wait_until(
        Duration::from_secs(60),
        &format!("pod {namespace}/{name} Running"),
        || {
            let pod = cluster
                .kubectl_json(&["-n", namespace, "get", "pod", name])
                .ok()?;
            (pod["status"]["phase"] == "Running")
                .then(|| {
                    let (id, _) = container_ids(&pod).get("app")?.clone();
                    Some(id.trim_start_matches("containerd://").to_string())
                })
                .flatten()
        },
    )
}

#[test]
fn pods_read_their_own_token_ca_and_namespace_and_the_token_is_renewed() {
    let cluster = Cluster::start("sat");
    cluster.apply(&pod("reader", &cluster.node_name, "default"));
    let id = running_container(&cluster, "reader", "default");

    let token = read(&cluster, &id, &format!("{MOUNT}/token"));
    let c = claims(&token);
    assert_eq!(c["sub"], "system:serviceaccount:default:default");
    assert_eq!(c["kubernetes.io"]["pod"]["name"], "reader");
    assert_eq!(
        c["kubernetes.io"]["node"]["name"],
        cluster.node_name.as_str()
    );
    assert_eq!(
        read(&cluster, &id, &format!("{MOUNT}/namespace")),
        "default"
    );
    let ca = std::fs::read_to_string(cluster.api_dir().join("ca.crt")).unwrap();
    assert_eq!(read(&cluster, &id, &format!("{MOUNT}/ca.crt")), ca);
    // The token authenticates as the pod's service account.
    let who = whoami(&cluster, &token);
    assert_eq!(who, "system:serviceaccount:default:default");
    // The files are links through ..data, which a renewal swaps at once.
    let listing = cluster.exec(&id, &["ls", "-la", MOUNT]).stdout;
    let listing = String::from_utf8_lossy(&listing);
    assert!(listing.contains("token -> ..data/token"), "{listing}");

    // The 10 s token is renewed after 8 s, before it expires, and the new one works.
    let first = read(&cluster, &id, "/short/token");
    let renewed = cluster.wait_until(Duration::from_secs(15), "the short token renewed", || {
        let now = read(&cluster, &id, "/short/token");
        (now != first && !now.is_empty()).then_some(now)
    });
    let (old_exp, new_exp) = (
        claims(&first)["exp"].as_i64(),
        claims(&renewed)["exp"].as_i64(),
    );
    assert!(new_exp > old_exp, "{old_exp:?} then {new_exp:?}");
    let who = whoami(&cluster, &renewed);
    assert_eq!(who, "system:serviceaccount:default:default");
    std::thread::sleep(Duration::from_secs(3));
    let err = cluster
        .kubectl(&["--token", &first, "auth", "whoami"])
        .unwrap_err();
    assert!(
        err.contains("Unauthorized"),
        "the first token has expired: {err}"
    );
}

#[test]
fn a_pod_without_its_service_account_waits_with_an_event_then_starts() {
    let cluster = Cluster::start("sam");
    cluster.kubectl(&["create", "namespace", "fresh"]).unwrap();
    let ca = format!(
        "--from-file=ca.crt={}",
        cluster.api_dir().join("ca.crt").display()
    );
    cluster
        .kubectl(&[
            "-n",
            "fresh",
            "create",
            "configmap",
            "kube-root-ca.crt",
            &ca,
        ])
        .unwrap();
    cluster.apply(&pod("early", &cluster.node_name, "fresh"));
    cluster.wait_until(Duration::from_secs(30), "a FailedMount event", || {
        let events = cluster
            .kubectl_json(&["-n", "fresh", "get", "events"])
            .ok()?;
        events["items"].as_array()?.iter().find_map(|e| {
            let message = e["message"].as_str().unwrap_or("");
            (e["reason"] == "FailedMount"
                && message.contains("failed to fetch token for service account fresh/default"))
            .then_some(())
        })
    });
    let pod = cluster
        .kubectl_json(&["-n", "fresh", "get", "pod", "early"])
        .unwrap();
    assert_ne!(pod["status"]["phase"], "Running");
    cluster
        .kubectl(&["-n", "fresh", "create", "serviceaccount", "default"])
        .unwrap();
    let id = running_container(&cluster, "early", "fresh");
    let token = read(&cluster, &id, &format!("{MOUNT}/token"));
    assert_eq!(claims(&token)["sub"], "system:serviceaccount:fresh:default");
    assert_eq!(read(&cluster, &id, &format!("{MOUNT}/namespace")), "fresh");
}
