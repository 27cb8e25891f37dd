//! `keelson-agent join`: what `kubeadm join`'s token discovery does before the node starts. The
//! cluster's CA is read from ConfigMap kube-public/cluster-info without credentials and without
//! trusting the connection, and is trusted only if the SHA-256 of its public key (DER
//! SubjectPublicKeyInfo) is the `--ca-cert-hash` the user was given; then the CA and a bootstrap
//! kubeconfig (the server, that CA, the token) are written for the agent's TLS bootstrap.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use tokio::net::TcpStream;

/// What the user asked for; `ca` is the pin, or a CA file already on this machine (the API
/// server's own node, as kubeadm's file discovery).
#[derive(Clone, Debug)]
pub struct Join {
    pub server: String,
    pub token: String,
    pub ca: Trust,
    /// Where `ca.crt` and `bootstrap.kubeconfig` are written.
    pub dir: PathBuf,
}

#[derive(Clone, Debug)]
pub enum Trust {
    /// `sha256:<64 hex digits>` of the CA's public key.
    Pin(String),
    File(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("--token must look like abcdef.0123456789abcdef (got {0:?})")]
    Token(String),
    #[error("--ca-cert-hash must be sha256: and 64 hex digits (got {0:?})")]
    Hash(String),
    #[error("the API server's URL must be https://HOST:PORT (got {0:?})")]
    Server(String),
    #[error("cannot reach {server}: {why}")]
    Unreachable { server: String, why: String },
    #[error("{server} gave no usable cluster-info: {why}")]
    ClusterInfo { server: String, why: String },
    #[error("the API server's CA is {have}, not the {want} given; refusing to join")]
    Mismatch { have: String, want: String },
    #[error("CA {path}: {why}")]
    CaFile { path: String, why: String },
    #[error("writing {path}: {why}")]
    Write { path: String, why: String },
}

/// Checks the flags, reads and checks the CA, and writes `ca.crt` and `bootstrap.kubeconfig`
/// (0600) into `dir`; returns the kubeconfig's path.
pub async fn join(j: &Join) -> Result<PathBuf, JoinError> {
    check_token(&j.token)?;
    let ca_pem = match &j.ca {
        Trust::Pin(want) => {
            check_hash(want)?;
            let pem = discover_ca(&j.server).await?;
            let have =
                keelson_daemon::x509::ca_cert_hash(&pem).map_err(|why| JoinError::ClusterInfo {
                    server: j.server.clone(),
                    why,
                })?;
            if &have != want {
                return Err(JoinError::Mismatch {
                    have,
                    want: want.clone(),
                });
            }
            pem
        }
        Trust::File(path) => {
            let ca_file = |why: String| JoinError::CaFile {
                path: path.display().to_string(),
                why,
            };
            let pem = std::fs::read(path).map_err(|e| ca_file(e.to_string()))?;
            keelson_daemon::x509::ca_cert_hash(&pem).map_err(ca_file)?;
            pem
        }
    };
    write(&j.dir.join("ca.crt"), &ca_pem)?;
    let kubeconfig = j.dir.join("bootstrap.kubeconfig");
    let text = bootstrap_kubeconfig(&j.server, &ca_pem, &j.token);
    write(&kubeconfig, text.as_bytes())?;
    Ok(kubeconfig)
}

fn check_token(token: &str) -> Result<(), JoinError> {
    let ok = token.split_once('.').is_some_and(|(id, secret)| {
        let lower = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        id.len() == 6 && secret.len() == 16 && lower(id) && lower(secret)
    });
    ok.then_some(())
        .ok_or_else(|| JoinError::Token(token.to_string()))
}

fn check_hash(hash: &str) -> Result<(), JoinError> {
    let ok = hash.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    ok.then_some(())
        .ok_or_else(|| JoinError::Hash(hash.to_string()))
}

/// The CA (PEM) in kube-public/cluster-info, fetched over TLS that trusts any certificate:
/// nothing is sent but the request, and what comes back is trusted only through the pin.
async fn discover_ca(server: &str) -> Result<Vec<u8>, JoinError> {
    let authority = server
        .strip_prefix("https://")
        .map(|s| s.trim_end_matches('/'))
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .ok_or_else(|| JoinError::Server(server.to_string()))?;
    let unreachable = |why: String| JoinError::Unreachable {
        server: server.to_string(),
        why,
    };
    let host = match authority.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => h,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| JoinError::Server(format!("{server}: {e}")))?;
    let config = keelson_daemon::any_server_certificate()
        .map_err(|e| unreachable(e.to_string()))?
        .with_no_client_auth();
    let connect = async {
        let tcp = TcpStream::connect(authority)
            .await
            .map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let path = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
        keelson_daemon::http_get::get(tls, authority, path, Some("application/json")).await
    };
    let (status, body) = tokio::time::timeout(std::time::Duration::from_secs(10), connect)
        .await
        .map_err(|_| unreachable("no answer within 10 s".into()))?
        .map_err(unreachable)?;
    let bad = |why: String| JoinError::ClusterInfo {
        server: server.to_string(),
        why,
    };
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(bad(format!(
            "{status}: {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    ca_of_cluster_info(&body).map_err(bad)
}

/// The CA in the cluster-info ConfigMap's kubeconfig (its first cluster), PEM.
fn ca_of_cluster_info(configmap: &[u8]) -> Result<Vec<u8>, String> {
    let cm: serde_json::Value =
        serde_json::from_slice(configmap).map_err(|e| format!("not JSON: {e}"))?;
    let text = cm
        .pointer("/data/kubeconfig")
        .and_then(|v| v.as_str())
        .ok_or("no data.kubeconfig")?;
    let kc: Kubeconfig =
        serde_norway::from_str(text).map_err(|e| format!("its kubeconfig: {e}"))?;
    let data = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.as_deref())
        .ok_or("its kubeconfig has no certificate-authority-data")?;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("certificate-authority-data: {e}"))
}

/// The bootstrap kubeconfig: `server`, the CA inline, the token; names as kubeadm writes them.
pub fn bootstrap_kubeconfig(server: &str, ca_pem: &[u8], token: &str) -> String {
    let kc = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: "keelson".into(),
            cluster: Some(Cluster {
                server: Some(server.to_string()),
                certificate_authority_data: Some(
                    base64::engine::general_purpose::STANDARD.encode(ca_pem),
                ),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "bootstrap".into(),
            auth_info: Some(AuthInfo {
                token: Some(token.to_string().into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: "bootstrap".into(),
            context: Some(Context {
                cluster: "keelson".into(),
                user: Some("bootstrap".into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        current_context: Some("bootstrap".into()),
        ..Default::default()
    };
    serde_norway::to_string(&kc).unwrap_or_default()
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), JoinError> {
    super::write_private(path, &String::from_utf8_lossy(bytes)).map_err(|e| JoinError::Write {
        path: path.display().to_string(),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn tokens_and_hashes_are_checked_before_anything_is_fetched() {
        assert!(check_token("abcdef.0123456789abcdef").is_ok());
        for bad in [
            "abcdef",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdefg",
            "",
        ] {
            let e = check_token(bad).unwrap_err().to_string();
            assert!(e.contains("--token"), "{e}");
        }
        assert!(check_hash(&format!("sha256:{}", "a1".repeat(32))).is_ok());
        for bad in [
            "sha256:abc",
            &"a1".repeat(32),
            &format!("sha1:{}", "a1".repeat(32)),
        ] {
            assert!(check_hash(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ca_comes_from_cluster_info_and_goes_into_the_bootstrap_kubeconfig() {
        let pem = ca();
        let info = bootstrap_kubeconfig("https://10.0.0.1:6443", pem.as_bytes(), "x");
        let cm = serde_json::json!({"data": {"kubeconfig": info}});
        let got = ca_of_cluster_info(cm.to_string().as_bytes()).unwrap();
        assert_eq!(got, pem.as_bytes());
        let kc: Kubeconfig = serde_norway::from_str(&info).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("bootstrap"));
        let err = ca_of_cluster_info(br#"{"data": {}}"#).unwrap_err();
        assert!(err.contains("data.kubeconfig"), "{err}");
    }
}
