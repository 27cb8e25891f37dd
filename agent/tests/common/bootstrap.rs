//! TLS bootstrap for a test cluster: a bootstrap token, a kubeconfig holding it, kubectl as
//! another identity, the CSRs sent.

use std::path::Path;

use keelson_testing::Kubectl;
use serde_json::Value;

use super::{Cluster, CP_IP};

pub const TOKEN_ID: &str = "abcdef";
pub const TOKEN: &str = "abcdef.0123456789abcdef";

/// The token Secret, as `kubeadm token create` (or scripts/token) writes it.
pub fn token_secret() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-{TOKEN_ID}\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: {TOKEN_ID}\n  token-secret: 0123456789abcdef\n  expiration: \"2099-01-01T00:00:00Z\"\n  usage-bootstrap-authentication: \"true\"\n"
    )
}

/// A kubeconfig with the cluster's server and CA and the bootstrap token, nothing else.
pub fn write_bootstrap_kubeconfig(cluster: &Cluster, path: &Path) {
    let ca = std::fs::read(cluster.api_dir().join("ca.crt")).expect("the cluster CA");
    let ca = keelson_apimachinery::base64::encode(&ca);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://{CP_IP}:6443\n    certificate-authority-data: {ca}\ncontexts:\n- name: tls-bootstrap\n  context:\n    cluster: kubernetes\n    user: tls-bootstrap\ncurrent-context: tls-bootstrap\nusers:\n- name: tls-bootstrap\n  user:\n    token: {TOKEN}\n"
    );
    std::fs::write(path, text).expect("write the bootstrap kubeconfig");
}

/// The token Secret applied and the bootstrap kubeconfig written; its path.
pub fn prepare(cluster: &Cluster) -> std::path::PathBuf {
    cluster.apply(&token_secret());
    let path = cluster.tmp.path().join("bootstrap.kubeconfig");
    write_bootstrap_kubeconfig(cluster, &path);
    path
}

/// kubectl in the control-plane host with another kubeconfig.
pub fn kubectl_as(cluster: &Cluster, kubeconfig: &Path) -> Kubectl {
    Kubectl {
        kubeconfig: kubeconfig.to_path_buf(),
        netns: Some(cluster.cp.path()),
    }
}

pub fn csrs(cluster: &Cluster) -> Vec<Value> {
    cluster.kubectl_json(&["get", "csr"]).expect("list CSRs")["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Whether a CSR holds the Approved condition.
pub fn is_approved(csr: &Value) -> bool {
    csr["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Approved" && c["status"] == "True")
    })
}
