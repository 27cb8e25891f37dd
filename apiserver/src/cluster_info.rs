//! ConfigMap kube-public/cluster-info, as kubeadm keeps it: a kubeconfig with one cluster (the
//! advertised address and the CA, no user) that anyone may read, so that a joining node can
//! find the server and check the CA against the `--ca-cert-hash` it was given.

use crate::resources;
use crate::rest::{self, Api, Sub, Target};
use keelson_apimachinery::well_known::CLUSTER_INFO_CONFIGMAP;
use serde_json::json;

const NAMESPACE: &str = "kube-public";

/// The kubeconfig kubeadm writes into cluster-info; `ca_pem` is None without TLS.
pub fn kubeconfig(server: &str, ca_pem: Option<&str>) -> String {
    let ca = ca_pem.map_or_else(String::new, |pem| {
        let data = keelson_apimachinery::base64::encode(pem.as_bytes());
        format!("    certificate-authority-data: {data}\n")
    });
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n{ca}    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
    )
}

/// Creates or updates the ConfigMap (and namespace kube-public if it is missing). Failures are
/// logged: the server still serves, joining nodes would then be told nothing.
pub async fn publish(api: &Api, server: &str, ca_pem: Option<&str>) {
    let (Some(ns), Some(cm)) = (
        resources::lookup("", "v1", "namespaces"),
        resources::lookup("", "v1", "configmaps"),
    ) else {
        return;
    };
    if api.store.get(&ns.key("", NAMESPACE)).is_none() {
        let obj = json!({ "metadata": { "name": NAMESPACE } });
        if let Err(e) = rest::create(api, ns, "", obj, false).await {
            tracing::warn!(error = %e.message, "creating namespace kube-public failed");
        }
    }
    let target = Target {
        res: cm,
        namespace: NAMESPACE.into(),
        name: CLUSTER_INFO_CONFIGMAP.into(),
    };
    let config = kubeconfig(server, ca_pem);
    let result = match api.store.get(&target.key()) {
        None => {
            let obj = json!({ "metadata": { "name": CLUSTER_INFO_CONFIGMAP },
                "data": { "kubeconfig": config } });
            rest::create(api, cm, NAMESPACE, obj, false).await
        }
        Some(e) => {
            let mut obj = (*e.obj).clone();
            crate::object::set_path(&mut obj, &["data", "kubeconfig"], json!(config));
            rest::update(api, &target, obj, Sub::Main, false).await
        }
    };
    if let Err(e) = result {
        tracing::warn!(error = %e.message, "writing kube-public/cluster-info failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_has_one_cluster_and_no_user() {
        let k = kubeconfig("https://10.0.0.1:6443", Some("PEM"));
        let v: serde_json::Value = serde_norway::from_str(&k).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://10.0.0.1:6443"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        assert!(v["users"].is_null() && v["contexts"].is_null());
        let plain: serde_json::Value =
            serde_norway::from_str(&kubeconfig("http://127.0.0.1:8080", None)).unwrap();
        assert!(plain["clusters"][0]["cluster"]
            .get("certificate-authority-data")
            .is_none());
    }
}
