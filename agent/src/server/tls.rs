//! The serving certificate for port 10250: given files, or a self-signed one for the node's
//! name and address (the kubelet does the same when no certificate is configured).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no private key in {0}")]
    NoKey(String),
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("client CA {path}: {message}")]
    ClientCa { path: String, message: String },
}

/// With `client_ca`, clients must present a certificate signed by it (as the kubelet's
/// --client-ca-file); without, anyone reaching the port may read logs and metrics.
pub fn server_config(
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
    names: &[String],
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (certs, key) = match (cert_file, key_file) {
        (Some(c), Some(k)) => load(c, k)?,
        _ => {
            let generated = rcgen::generate_simple_self_signed(names.to_vec())?;
            let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                .map_err(|_| TlsError::NoKey("generated".into()))?;
            (vec![generated.cert.der().clone()], key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = match client_ca {
        None => builder.with_no_client_auth().with_single_cert(certs, key)?,
        Some(path) => {
            let ca_error = |message: String| TlsError::ClientCa {
                path: path.display().to_string(),
                message,
            };
            let pem = std::fs::read(path).map_err(|e| ca_error(e.to_string()))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                roots
                    .add(cert.map_err(|e| ca_error(e.to_string()))?)
                    .map_err(|e| ca_error(e.to_string()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| ca_error(e.to_string()))?;
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(certs, key)?
        }
    };
    Ok(Arc::new(config))
}

fn load(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| TlsError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Read {
            path: cert.display().to_string(),
            source,
        })?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|source| TlsError::Read {
            path: key.display().to_string(),
            source,
        })?
        .ok_or_else(|| TlsError::NoKey(key.display().to_string()))?;
    Ok((certs, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    struct Pki {
        dir: tempfile::TempDir,
        ca_cert: rcgen::Certificate,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    fn pki() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca_cert.pem()).unwrap();
        let issuer = rcgen::Issuer::new(params, ca_key);
        let server_key = rcgen::KeyPair::generate().unwrap();
        let server = rcgen::CertificateParams::new(vec!["node-a".to_string()])
            .unwrap()
            .signed_by(&server_key, &issuer)
            .unwrap();
        std::fs::write(dir.path().join("server.crt"), server.pem()).unwrap();
        std::fs::write(dir.path().join("server.key"), server_key.serialize_pem()).unwrap();
        Pki {
            dir,
            ca_cert,
            issuer,
        }
    }

    async fn handshake(
        server: Arc<rustls::ServerConfig>,
        pki: &Pki,
        with_client_cert: bool,
    ) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_cert.der().clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let client = if with_client_cert {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["apiserver".to_string()])
                .unwrap()
                .signed_by(&key, &pki.issuer)
                .unwrap();
            builder
                .with_client_auth_cert(
                    vec![cert.der().clone()],
                    PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
                )
                .unwrap()
        } else {
            builder.with_no_client_auth()
        };
        let (a, b) = tokio::io::duplex(64 * 1024);
        let server_side =
            tokio::spawn(async move { TlsAcceptor::from(server).accept(b).await.is_ok() });
        let name = ServerName::try_from("node-a").unwrap();
        // The client stream stays open until the server is done (it writes session tickets last).
        let client_stream = TlsConnector::from(Arc::new(client)).connect(name, a).await;
        let server_ok = server_side.await.unwrap();
        let client_ok = client_stream.is_ok();
        drop(client_stream);
        client_ok && server_ok
    }

    #[tokio::test]
    async fn client_ca_requires_a_signed_client_certificate() {
        let pki = pki();
        let p = |n: &str| pki.dir.path().join(n);
        let names = ["node-a".to_string()];
        let open =
            server_config(Some(&p("server.crt")), Some(&p("server.key")), &names, None).unwrap();
        assert!(
            handshake(open, &pki, false).await,
            "without a client CA anyone connects"
        );
        let strict = server_config(
            Some(&p("server.crt")),
            Some(&p("server.key")),
            &names,
            Some(&p("ca.crt")),
        )
        .unwrap();
        assert!(
            !handshake(strict.clone(), &pki, false).await,
            "no client certificate: refused"
        );
        assert!(
            handshake(strict, &pki, true).await,
            "a certificate from the CA: accepted"
        );
        let missing = server_config(None, None, &names, Some(&p("nope.crt"))).unwrap_err();
        assert!(missing.to_string().contains("nope.crt"), "{missing}");
    }
}
