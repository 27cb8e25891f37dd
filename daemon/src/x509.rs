//! Who a client certificate names, as kube-apiserver's and the kubelet's x509 authenticators read
//! it: the user is the subject's CommonName, the groups its Organization values.

use x509_parser::pem::parse_x509_pem;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The identity in a certificate's subject.
#[derive(Clone, Debug, PartialEq)]
pub struct SubjectIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

/// The identity a DER certificate names; None when it does not parse or has no (or an empty)
/// CommonName. Whether the chain is trusted is the caller's to check.
pub fn subject_identity(der: &[u8]) -> Option<SubjectIdentity> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .find_map(|cn| cn.as_str().ok())
        .filter(|n| !n.is_empty())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(String::from)
        .collect();
    Some(SubjectIdentity { user, groups })
}

/// `sha256:<hex>` of the first certificate's DER SubjectPublicKeyInfo in `pem`, as kubeadm
/// prints and checks `--discovery-token-ca-cert-hash`.
pub fn ca_cert_hash(pem: &[u8]) -> Result<String, String> {
    let (_, block) = parse_x509_pem(pem).map_err(|e| format!("not a PEM certificate: {e}"))?;
    let cert = block
        .parse_x509()
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let spki = cert.tbs_certificate.subject_pki.raw;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// notAfter (unix seconds) of the first certificate in `pem`.
pub fn not_after(pem: &[u8]) -> Option<i64> {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .find(|b| b.label == "CERTIFICATE")?;
    let cert = block.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::pem::parse_x509_pem;

    #[test]
    fn the_ca_hash_is_of_the_public_key_as_kubeadm_prints_it() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        // The SubjectPublicKeyInfo from the key's own PEM, not from the certificate.
        let (_, spki) = parse_x509_pem(key.public_key_pem().as_bytes()).unwrap();
        let want = ring::digest::digest(&ring::digest::SHA256, &spki.contents);
        let hex: String = want.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            ca_cert_hash(pem.as_bytes()).unwrap(),
            format!("sha256:{hex}")
        );
        assert!(ca_cert_hash(b"not a certificate").is_err());
    }
}
