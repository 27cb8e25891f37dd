//! The kubeconfig the agent writes for itself (the bootstrap kubeconfig's server and CA, its own
//! client certificate), and whether an existing one's certificate still serves. Pure, but for
//! reading the certificate files a kubeconfig names.

use std::path::Path;

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

/// The cluster (server, CA) of the kubeconfig's current context, or its only cluster.
pub fn current_cluster(kc: &Kubeconfig) -> Result<Cluster, String> {
    let context = kc
        .current_context
        .as_deref()
        .and_then(|name| kc.contexts.iter().find(|c| c.name == name))
        .and_then(|c| c.context.as_ref());
    let named = match context {
        Some(ctx) => kc.clusters.iter().find(|c| c.name == ctx.cluster),
        None if kc.clusters.len() == 1 => kc.clusters.first(),
        None => None,
    };
    let cluster = named
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| "no cluster for its current context".to_string())?;
    match cluster.server.as_deref() {
        Some(s) if !s.is_empty() => Ok(cluster),
        _ => Err("its cluster has no server".to_string()),
    }
}

/// The user of the kubeconfig's current context.
fn current_user(kc: &Kubeconfig) -> Option<&AuthInfo> {
    let name = kc.current_context.as_deref()?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == name)?
        .context
        .as_ref()?;
    let user = ctx.user.as_deref()?;
    kc.auth_infos
        .iter()
        .find(|a| a.name == user)?
        .auth_info
        .as_ref()
}

/// A kubeconfig for `cluster`'s server and CA (file or data, as the bootstrap kubeconfig had
/// them) with the client certificate and key in `cert_file`; names as the kubelet writes them.
pub fn render(cluster: &Cluster, cert_file: &Path) -> Result<String, serde_norway::Error> {
    let cert = cert_file.display().to_string();
    let kc = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: "default-cluster".into(),
            cluster: Some(Cluster {
                server: cluster.server.clone(),
                certificate_authority: cluster.certificate_authority.clone(),
                certificate_authority_data: cluster.certificate_authority_data.clone(),
                insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
                tls_server_name: cluster.tls_server_name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "default-auth".into(),
            auth_info: Some(AuthInfo {
                client_certificate: Some(cert.clone()),
                client_key: Some(cert),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: "default-context".into(),
            context: Some(Context {
                cluster: "default-cluster".into(),
                user: Some("default-auth".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some("default-context".into()),
        ..Default::default()
    };
    serde_norway::to_string(&kc)
}

/// Why the certificates in `pem` cannot authenticate at `now_unix` (none, unparsable, not yet
/// or no longer valid), or None when every one is within its validity.
pub fn cert_problem(pem: &[u8], now_unix: i64) -> Option<String> {
    let mut count = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = match block {
            Ok(b) => b,
            Err(e) => return Some(format!("unreadable PEM: {e}")),
        };
        if block.label != "CERTIFICATE" {
            continue;
        }
        let cert = match block.parse_x509() {
            Ok(c) => c,
            Err(e) => return Some(format!("not an X.509 certificate: {e}")),
        };
        let validity = cert.validity();
        if now_unix >= validity.not_after.timestamp() {
            return Some(format!("expired at {}", validity.not_after));
        }
        if now_unix < validity.not_before.timestamp() {
            return Some(format!("not valid before {}", validity.not_before));
        }
        count += 1;
    }
    (count == 0).then(|| "no certificate".to_string())
}

/// Why the kubeconfig at `path` cannot be used as the node's credentials (as the kubelet: it
/// must hold a client certificate, readable and within its validity), or None if it can.
pub fn problem(path: &Path, now_unix: i64) -> Option<String> {
    if !path.exists() {
        return Some("does not exist".to_string());
    }
    let kc = match Kubeconfig::read_from(path) {
        Ok(kc) => kc,
        Err(e) => return Some(format!("unreadable: {e}")),
    };
    let Some(user) = current_user(&kc) else {
        return Some("no user for its current context".to_string());
    };
    let pem = match (&user.client_certificate_data, &user.client_certificate) {
        (Some(data), _) => keelson_apimachinery::base64::decode(data)
            .ok_or_else(|| "client-certificate-data is not base64".to_string()),
        (None, Some(file)) => std::fs::read(file).map_err(|e| format!("{file}: {e}")),
        (None, None) => Err("no client certificate".to_string()),
    };
    match pem {
        Ok(pem) => cert_problem(&pem, now_unix).map(|p| format!("client certificate: {p}")),
        Err(e) => Some(format!("client certificate: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOTSTRAP: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: tls-bootstrap\n  context:\n    cluster: kubernetes\n    user: tls-bootstrap\ncurrent-context: tls-bootstrap\nusers:\n- name: tls-bootstrap\n  user:\n    token: abcdef.0123456789abcdef\n";

    #[test]
    fn the_written_kubeconfig_keeps_server_and_ca_and_uses_the_certificate_file() {
        let bootstrap = Kubeconfig::from_yaml(BOOTSTRAP).unwrap();
        let cluster = current_cluster(&bootstrap).unwrap();
        let file = Path::new("/var/lib/keelson/n1/agent/pki/keelson-agent-client-current.pem");
        let text = render(&cluster, file).unwrap();
        let kc = Kubeconfig::from_yaml(&text).unwrap();
        let written = current_cluster(&kc).unwrap();
        assert_eq!(written.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(written.certificate_authority_data.as_deref(), Some("Q0E="));
        let user = current_user(&kc).unwrap();
        let path = Some(file.display().to_string());
        assert_eq!(user.client_certificate, path);
        assert_eq!(user.client_key, path);
        assert!(user.token.is_none() && !text.contains("abcdef"), "{text}");
    }

    #[test]
    fn a_kubeconfig_without_a_cluster_server_is_refused() {
        let kc = Kubeconfig::from_yaml("apiVersion: v1\nkind: Config\n").unwrap();
        assert!(current_cluster(&kc).is_err());
    }

    fn cert(not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        format!(
            "{}{}",
            params.self_signed(&key).unwrap().pem(),
            key.serialize_pem()
        )
    }

    #[test]
    fn certificate_validity_is_checked() {
        // 2026-01-01T00:00:00Z
        let now = 1_767_225_600;
        assert_eq!(
            cert_problem(cert((2025, 1, 1), (2027, 1, 1)).as_bytes(), now),
            None
        );
        let expired = cert_problem(cert((2024, 1, 1), (2025, 1, 1)).as_bytes(), now).unwrap();
        assert!(expired.contains("expired"), "{expired}");
        let early = cert_problem(cert((2026, 6, 1), (2027, 1, 1)).as_bytes(), now).unwrap();
        assert!(early.contains("not valid before"), "{early}");
        let key_only = rcgen::KeyPair::generate().unwrap().serialize_pem();
        assert_eq!(
            cert_problem(key_only.as_bytes(), now).as_deref(),
            Some("no certificate")
        );
    }

    #[test]
    fn an_existing_kubeconfig_needs_a_valid_client_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let now = 1_767_225_600;
        assert_eq!(problem(&path, now).as_deref(), Some("does not exist"));
        // A token (the bootstrap kubeconfig, an admin's) is not the node's own identity.
        std::fs::write(&path, BOOTSTRAP).unwrap();
        assert!(problem(&path, now)
            .unwrap()
            .contains("no client certificate"));
        let cluster = current_cluster(&Kubeconfig::from_yaml(BOOTSTRAP).unwrap()).unwrap();
        let file = dir.path().join("client.pem");
        std::fs::write(&path, render(&cluster, &file).unwrap()).unwrap();
        assert!(problem(&path, now).unwrap().contains("client.pem"));
        std::fs::write(&file, cert((2025, 1, 1), (2027, 1, 1))).unwrap();
        assert_eq!(problem(&path, now), None);
        std::fs::write(&file, cert((2024, 1, 1), (2025, 1, 1))).unwrap();
        assert!(problem(&path, now).unwrap().contains("expired"));
        std::fs::write(&file, "garbage").unwrap();
        assert!(problem(&path, now).is_some());
    }
}
