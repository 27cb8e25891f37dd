//! The certificate port 10250 presents, replaceable while it serves: each new TLS handshake
//! takes the current one (upstream's kubelet does the same with GetCertificate).

use std::sync::{Arc, RwLock};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
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
            current: RwLock::new(first),
        })
    }

    /// New handshakes present `next`; connections already open keep theirs.
    pub fn replace(&self, next: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut c) => *c = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
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
        assert_eq!(serving.current().cert, first.cert);
        serving.replace(second.clone());
        assert_eq!(serving.current().cert, second.cert);
        assert!(from_pem(b"junk").is_err());
    }
}
