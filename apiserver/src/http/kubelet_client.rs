//! How the API server reaches agents' port 10250 (pods/log): over TLS, presenting its kubelet
//! client certificate (--kubelet-client-certificate / --kubelet-client-key, by default the data
//! directory's, CN kube-apiserver-kubelet-client, which the agents authenticate with their
//! --client-ca-file and authorize through RBAC's system:kubelet-api-admin). Like kube-apiserver
//! without --kubelet-certificate-authority, the node's serving certificate is not verified.

use crate::certs::{self, CertError};
use rustls::pki_types::ServerName;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

#[derive(Debug, thiserror::Error)]
pub enum KubeletClientError {
    #[error("--kubelet-client-certificate and --kubelet-client-key go together (both or neither)")]
    OnlyOne,
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error("no certificate in {0}")]
    NoCert(String),
    #[error("no private key in {0}")]
    NoKey(String),
    #[error("the kubelet client certificate: {0}")]
    Cert(#[from] CertError),
    #[error("kubelet client TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The TLS configuration connections to agents use.
#[derive(Clone, Debug)]
pub struct KubeletClient {
    config: Arc<rustls::ClientConfig>,
}

impl KubeletClient {
    /// From the flags' files; else the data directory's certificate (made on first start)
    /// when the server has a CA (`data_dir`); else no client certificate at all.
    pub fn load(
        cert: Option<&Path>,
        key: Option<&Path>,
        data_dir: Option<&Path>,
    ) -> Result<KubeletClient, KubeletClientError> {
        let files = match (cert, key, data_dir) {
            (Some(c), Some(k), _) => Some((c.to_path_buf(), k.to_path_buf())),
            (None, None, Some(dir)) => Some(certs::ensure_kubelet_client(dir)?),
            (None, None, None) => None,
            _ => return Err(KubeletClientError::OnlyOne),
        };
        // Agents serve self-signed certificates; the handshake's signature is still checked.
        let builder = keelson_daemon::any_server_certificate()?;
        let config = match files {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let certs: Vec<_> = rustls_pemfile::certs(&mut read(&cert)?.as_bytes())
                    .filter_map(Result::ok)
                    .collect();
                if certs.is_empty() {
                    return Err(KubeletClientError::NoCert(cert.display().to_string()));
                }
                let key = rustls_pemfile::private_key(&mut read(&key)?.as_bytes())
                    .ok()
                    .flatten()
                    .ok_or_else(|| KubeletClientError::NoKey(key.display().to_string()))?;
                builder.with_client_auth_cert(certs, key)?
            }
        };
        Ok(KubeletClient {
            config: Arc::new(config),
        })
    }

    /// A TLS connection to the agent at `addr:port`.
    pub async fn connect(&self, addr: &str, port: u16) -> Result<TlsStream<TcpStream>, String> {
        let tcp = TcpStream::connect((addr, port))
            .await
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from(addr.to_string()).map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    }
}

fn read(path: &Path) -> Result<String, KubeletClientError> {
    std::fs::read_to_string(path).map_err(|e| KubeletClientError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_directorys_certificate_is_made_once_for_the_kubelet_client_user() {
        let dir = tempfile::tempdir().unwrap();
        certs::ensure(dir.path(), &["127.0.0.1".to_string()]).unwrap();
        KubeletClient::load(None, None, Some(dir.path())).unwrap();
        let crt = dir.path().join("apiserver-kubelet-client.crt");
        let first = std::fs::read_to_string(&crt).unwrap();
        KubeletClient::load(None, None, Some(dir.path())).unwrap();
        assert_eq!(std::fs::read_to_string(&crt).unwrap(), first, "kept");
        let der = rustls_pemfile::certs(&mut first.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let user = crate::auth::x509::user(&der).unwrap();
        assert_eq!(user.name, certs::KUBELET_CLIENT_USER);
        assert!(user.groups.is_empty(), "{:?}", user.groups);
    }

    #[test]
    fn flags_name_both_files_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let crt = dir.path().join("c.crt");
        let only = KubeletClient::load(Some(&crt), None, Some(dir.path())).unwrap_err();
        assert!(only.to_string().contains("go together"), "{only}");
        let missing = KubeletClient::load(Some(&crt), Some(&crt), None).unwrap_err();
        assert!(missing.to_string().contains("c.crt"), "{missing}");
        std::fs::write(&crt, "not pem").unwrap();
        let empty = KubeletClient::load(Some(&crt), Some(&crt), None).unwrap_err();
        assert!(matches!(empty, KubeletClientError::NoCert(_)), "{empty}");
        assert!(
            KubeletClient::load(None, None, None).is_ok(),
            "no certificate at all"
        );
    }
}
