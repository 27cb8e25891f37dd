//! The certificate port 10250 presents, replaceable while it serves: each new TLS handshake
//! takes the current one (upstream's kubelet does the same with GetCertificate). Until the first
//! is issued there is none, and handshakes fail, as the kubelet's with serverTLSBootstrap.

use std::sync::{Arc, RwLock};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

/// A certificate chain and key as rustls signs with them.
pub fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, rustls::Error> {
    let signing = rustls::crypto::ring::sign::any_supported_type(key)?;
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

/// The certificates and key of a PEM pair (as the rotation writes them: certificate, then key).
pub fn from_pem(pem: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate".into());
    }
    let key = rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| format!("unreadable key: {e}"))?
        .ok_or_else(|| "no private key".to_string())?;
    certified_key(certs, &key).map_err(|e| format!("unusable key: {e}"))
}

impl ServingCert {
    pub fn new(first: Arc<CertifiedKey>) -> Arc<ServingCert> {
        Arc::new(ServingCert {
            current: RwLock::new(Some(first)),
        })
    }

    /// No certificate yet (the serving CSR not issued): handshakes are refused until `replace`.
    pub fn pending() -> Arc<ServingCert> {
        Arc::new(ServingCert {
            current: RwLock::new(None),
        })
    }

    /// New handshakes present `next`; connections already open keep theirs.
    pub fn replace(&self, next: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut c) => *c = Some(next),
            Err(poisoned) => *poisoned.into_inner() = Some(next),
        }
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self.current();
        if current.is_none() {
            tracing::debug!("no serving certificate available for the kubelet: handshake refused");
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> String {
        let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        format!("{}{}", c.cert.pem(), c.signing_key.serialize_pem())
    }

    #[test]
    fn the_replaced_certificate_is_the_one_resolved() {
        let first = from_pem(pair("a").as_bytes()).unwrap();
        let second = from_pem(pair("b").as_bytes()).unwrap();
        let serving = ServingCert::new(first.clone());
        assert_eq!(serving.current().unwrap().cert, first.cert);
        serving.replace(second.clone());
        assert_eq!(serving.current().unwrap().cert, second.cert);
        assert!(from_pem(b"junk").is_err());
    }

    /// A TLS handshake in memory between a client that takes any certificate and 10250's
    /// server configuration.
    fn handshake(serving: Arc<ServingCert>) -> Result<(), rustls::Error> {
        use rustls::{ClientConnection, ServerConnection};
        let server = crate::server::tls::server_config_with(serving, None).unwrap();
        let client = keelson_daemon::any_server_certificate()?.with_no_client_auth();
        let name = "node-a".try_into().unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name)?;
        let mut s = ServerConnection::new(server)?;
        while c.is_handshaking() || s.is_handshaking() {
            let mut wire = Vec::new();
            c.write_tls(&mut wire).unwrap();
            s.read_tls(&mut &wire[..]).unwrap();
            let server_side = s.process_new_packets();
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            c.read_tls(&mut &wire[..]).unwrap();
            server_side?;
            c.process_new_packets()?;
        }
        Ok(())
    }

    #[test]
    fn no_handshake_succeeds_until_the_first_certificate_is_issued() {
        let serving = ServingCert::pending();
        assert!(handshake(serving.clone()).is_err());
        serving.replace(from_pem(pair("node-a").as_bytes()).unwrap());
        handshake(serving).unwrap();
    }
}
