//! The serving certificate for port 10250: given files, or a self-signed one for the node's
//! name and address (the kubelet does the same when no certificate is configured).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::certificate::serving::ServingCert;

use super::auth::x509::ClientCa;

pub mod error;
pub use error::TlsError;

/// With `client_ca`, the handshake asks clients for a certificate (naming that CA) and lets
/// them in with or without one; which certificates authenticate is decided per request
/// (`auth::x509`), as the kubelet does, so that a bearer token still works beside them.
pub fn server_config(
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
    names: &[String],
    client_ca: Option<&ClientCa>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let serving = ServingCert::new(initial_cert(cert_file, key_file, names)?);
    server_config_with(serving, client_ca)
}

/// The given files' certificate, or a self-signed one for `names`.
pub fn initial_cert(
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
    names: &[String],
) -> Result<Arc<CertifiedKey>, TlsError> {
    let (certs, key) = match (cert_file, key_file) {
        (Some(c), Some(k)) => load(c, k)?,
        _ => {
            let generated = rcgen::generate_simple_self_signed(names.to_vec())?;
            let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                .map_err(|_| TlsError::NoKey("generated".into()))?;
            (vec![generated.cert.der().clone()], key)
        }
    };
    Ok(crate::certificate::serving::certified_key(certs, &key)?)
}

/// A server presenting whatever `serving` holds at each handshake (rotation replaces it).
pub fn server_config_with(
    serving: Arc<ServingCert>,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?;
    let config = match client_ca {
        None => builder.with_no_client_auth().with_cert_resolver(serving),
        Some(ca) => builder
            .with_client_cert_verifier(ca.handshake_verifier())
            .with_cert_resolver(serving),
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
    use crate::server::auth::x509::tests::TestCa;
    use rcgen::ExtendedKeyUsagePurpose;
    use rustls::pki_types::ServerName;
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    struct Pki {
        dir: tempfile::TempDir,
        ca: TestCa,
        other: TestCa,
        /// The self-signed serving certificate, which the test client trusts.
        server: CertificateDer<'static>,
    }

    /// The cluster CA, another CA, and a self-signed serving certificate for node-a.
    fn pki() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["node-a".to_string()]).unwrap();
        std::fs::write(dir.path().join("server.crt"), generated.cert.pem()).unwrap();
        let key = generated.signing_key.serialize_pem();
        std::fs::write(dir.path().join("server.key"), key).unwrap();
        Pki {
            ca: TestCa::new(dir.path(), "cluster-ca"),
            other: TestCa::new(dir.path(), "other-ca"),
            server: generated.cert.der().clone(),
            dir,
        }
    }

    /// Whether the handshake succeeds, and the client certificate the server then holds.
    async fn handshake(
        server: Arc<rustls::ServerConfig>,
        pki: &Pki,
        client_cert: Option<(Vec<u8>, rcgen::KeyPair)>,
    ) -> (bool, Option<Vec<u8>>) {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.server.clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let client = match client_cert {
            Some((der, key)) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from(der)],
                    PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        let (a, b) = tokio::io::duplex(64 * 1024);
        let server_side = tokio::spawn(async move {
            let stream = TlsAcceptor::from(server).accept(b).await.ok()?;
            let peer = stream.get_ref().1.peer_certificates();
            Some(peer.and_then(|c| c.first()).map(|c| c.to_vec()))
        });
        let name = ServerName::try_from("node-a").unwrap();
        // The client stream stays open until the server is done (it writes session tickets last).
        let client_stream = TlsConnector::from(Arc::new(client)).connect(name, a).await;
        let server_saw = server_side.await.unwrap();
        let ok = client_stream.is_ok() && server_saw.is_some();
        drop(client_stream);
        (ok, server_saw.flatten())
    }

    #[tokio::test]
    async fn a_client_ca_asks_for_certificates_and_lets_every_client_in() {
        let pki = pki();
        let p = |n: &str| pki.dir.path().join(n);
        let (crt, key) = (p("server.crt"), p("server.key"));
        let names = ["node-a".to_string()];
        let usage = ExtendedKeyUsagePurpose::ClientAuth;
        let open = server_config(Some(&crt), Some(&key), &names, None).unwrap();
        let own = pki.ca.client("alice", &[], usage.clone());
        let (ok, seen) = handshake(open, &pki, Some(own)).await;
        assert!(ok, "without a client CA anyone connects");
        assert_eq!(seen, None, "and no certificate is asked for");
        let ca = ClientCa::load(&pki.ca.path).unwrap();
        let strict = server_config(Some(&crt), Some(&key), &names, Some(&ca)).unwrap();
        assert_eq!(handshake(strict.clone(), &pki, None).await, (true, None));
        let own = pki.ca.client("alice", &[], usage.clone());
        let own_der = own.0.clone();
        assert_eq!(
            handshake(strict.clone(), &pki, Some(own)).await,
            (true, Some(own_der))
        );
        // Judged per request, where it authenticates nobody (auth::x509's tests).
        let foreign = pki.other.client("alice", &[], usage);
        let foreign_der = foreign.0.clone();
        assert_eq!(
            handshake(strict, &pki, Some(foreign)).await,
            (true, Some(foreign_der))
        );
    }
}
