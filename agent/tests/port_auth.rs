//! Port 10250 guarded as the kubelet guards it (--anonymous-auth=false, --client-ca-file,
//! token webhook, Webhook authorization): nobody reads a pod's logs without credentials, a
//! certificate of another CA or a forged token gets 401, a user the API server's RBAC does not
//! allow nodes/proxy gets 403 until a ClusterRoleBinding grants it, and kubectl logs works
//! through the API server's kubelet client certificate. The real agent, containerd,
//! keelson-apiserver, kubectl and openssl (see common/mod.rs).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// Runs openssl with `args` split at spaces (the paths here hold none).
fn openssl(args: &str) {
    let mut cmd = std::process::Command::new("openssl");
    keelson_testing::run(cmd.args(args.split(' '))).expect("openssl");
}

/// A client key and certificate for `cn` in `dir`, signed by `ca` (cert, key), or by a CA
/// made here when None; returns the certificate and key paths.
fn client_cert(dir: &Path, cn: &str, ca: Option<(&Path, &Path)>) -> (PathBuf, PathBuf) {
    let p = |n: &str| dir.join(format!("{cn}.{n}")).display().to_string();
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let (ca_crt, ca_key) = match ca {
        Some((c, k)) => (c.display().to_string(), k.display().to_string()),
        None => {
            let (c, k) = (p("other-ca.crt"), p("other-ca.key"));
            openssl(&format!(
                "req -x509 {ec} -keyout {k} -out {c} -subj /CN=other-ca -days 1"
            ));
            (c, k)
        }
    };
    let (key, csr, crt, ext) = (p("key"), p("csr"), p("crt"), p("ext"));
    openssl(&format!(
        "req -new {ec} -keyout {key} -out {csr} -subj /CN={cn}"
    ));
    std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").expect("extensions file");
    openssl(&format!(
        "x509 -req -in {csr} -CA {ca_crt} -CAkey {ca_key} -CAcreateserial -out {crt} -days 1 -extfile {ext}"
    ));
    (crt.into(), key.into())
}

/// GET `path` on the node's port 10250 presenting `cert` (certificate and key files).
fn get_with_cert(cluster: &Cluster, path: &str, cert: &(PathBuf, PathBuf)) -> String {
    let (crt, key) = (cert.0.display().to_string(), cert.1.display().to_string());
    cluster.agent_curl(path, &["--cert", &crt, "--key", &key])
}

const NODE_PROXY_READER: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-proxy-reader}
rules:
- apiGroups: ['']
  resources: [nodes/proxy]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reader-node-proxy}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-proxy-reader}
subjects:
- {kind: ServiceAccount, name: reader, namespace: default}
";

#[test]
fn the_agents_port_needs_credentials_and_the_api_servers_permission() {
    let cluster = Cluster::start("agauth");
    let node = cluster.node_name.clone();
    let body = format!(
        "  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'echo hello; sleep 3600']\n"
    );
    cluster.apply(&pod_yaml("talker", &node, &body));
    // Through the API server, which presents its kubelet client certificate.
    cluster.wait_until(Duration::from_secs(60), "kubectl logs talker", || {
        (cluster.kubectl(&["logs", "talker"]).ok()? == "hello\n").then_some(())
    });
    let logs = "/containerLogs/default/talker/app";
    assert_eq!(cluster.agent_get(logs, None), "Unauthorized 401");
    assert_eq!(cluster.agent_get("/pods", None), "Unauthorized 401");
    assert_eq!(cluster.agent_get("/metrics", None), "Unauthorized 401");
    assert_eq!(
        cluster.agent_get("/healthz", None),
        "ok 200",
        "probes need nothing"
    );
    assert_eq!(cluster.agent_get(logs, Some("forged")), "Unauthorized 401");

    let api_dir = cluster.api_dir();
    let tmp = cluster.tmp.path();
    let foreign = client_cert(tmp, "kube-apiserver-kubelet-client", None);
    assert_eq!(
        get_with_cert(&cluster, logs, &foreign),
        "Unauthorized 401",
        "another CA"
    );
    let cluster_ca = (api_dir.join("ca.crt"), api_dir.join("ca.key"));
    let mallory = client_cert(tmp, "mallory", Some((&cluster_ca.0, &cluster_ca.1)));
    assert_eq!(
        get_with_cert(&cluster, logs, &mallory),
        "Forbidden (user=mallory, verb=get, resource=nodes, subresource=proxy) 403",
        "the cluster CA's certificate authenticates; RBAC does not allow"
    );
    let apiserver = (
        api_dir.join("apiserver-kubelet-client.crt"),
        api_dir.join("apiserver-kubelet-client.key"),
    );
    assert_eq!(get_with_cert(&cluster, logs, &apiserver), "hello\n 200");

    cluster
        .kubectl(&["create", "serviceaccount", "reader"])
        .expect("serviceaccount");
    let token = cluster
        .kubectl(&["create", "token", "reader"])
        .expect("a token");
    let token = token.trim();
    let forbidden = "Forbidden (user=system:serviceaccount:default:reader, verb=get, resource=nodes, subresource=proxy) 403";
    assert_eq!(cluster.agent_get(logs, Some(token)), forbidden);
    cluster.apply(NODE_PROXY_READER);
    // The agent keeps a denial for 30 s (as the kubelet), then asks again.
    cluster.wait_until(
        Duration::from_secs(40),
        "the binding to take effect",
        || (cluster.agent_get(logs, Some(token)) == "hello\n 200").then_some(()),
    );
    let metrics = cluster.agent_get("/metrics", Some(token));
    assert!(
        metrics.ends_with("subresource=metrics) 403"),
        "nodes/proxy is not nodes/metrics: {metrics}"
    );
    // A container name that is not a DNS label never names a file, even for a reader.
    let escape = cluster.agent_get("/containerLogs/default/talker/..%2F..%2Fetc", Some(token));
    assert!(escape.ends_with(" 400"), "{escape}");
    assert!(escape.contains("invalid container name"), "{escape}");
}
