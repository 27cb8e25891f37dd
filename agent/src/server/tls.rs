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
}

pub fn server_config(
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
    names: &[String],
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
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
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
