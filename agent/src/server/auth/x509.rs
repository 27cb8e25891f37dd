//! Client certificates on port 10250, checked as the kubelet checks them (--client-ca-file):
//! the TLS handshake asks for a certificate but lets every client in, proving only that the
//! client holds the certificate's key; the chain to the client CA is verified per request, so a
//! certificate from another CA is a 401 (and a bearer token may still authenticate) rather
//! than a failed handshake. The user is the subject's CommonName, the groups its Organizations.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::review::UserInfo;
use crate::server::tls::error::TlsError;

/// The client CA: verifies chains to it.
#[derive(Clone, Debug)]
pub struct ClientCa {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientCa {
    /// Reads the CA bundle (PEM) at `path`.
    pub fn load(path: &Path) -> Result<ClientCa, TlsError> {
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
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
        Ok(ClientCa { verifier })
    }

    /// The user a client's leaf certificate (DER) names, if it chains to this CA, is valid now,
    /// is meant for client authentication and has a CommonName.
    pub fn user(&self, leaf: &[u8]) -> Option<UserInfo> {
        let cert = CertificateDer::from(leaf);
        self.verifier
            .verify_client_cert(&cert, &[], UnixTime::now())
            .ok()?;
        user_of(leaf)
    }

    /// The verifier for the TLS handshake: asks for a certificate (naming this CA), accepts any
    /// or none, and checks the client's signature with the certificate's key.
    pub fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(AnyClientCertificate(self.verifier.clone()))
    }
}

/// CommonName and Organizations of a certificate's subject (None without a CommonName).
fn user_of(der: &[u8]) -> Option<UserInfo> {
    let id = keelson_daemon::subject_identity(der)?;
    Some(UserInfo {
        name: id.user,
        groups: id.groups,
        ..Default::default()
    })
}

/// Lets every client certificate through the handshake; the chain is judged per request.
#[derive(Debug)]
struct AnyClientCertificate(Arc<dyn ClientCertVerifier>);

type Signature = Result<HandshakeSignatureValid, rustls::Error>;

impl ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    // The handshake's signature is still checked: whoever presents a certificate holds its key.
    fn verify_tls12_signature(
        &self,
        msg: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Signature {
        self.0.verify_tls12_signature(msg, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        msg: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Signature {
        self.0.verify_tls13_signature(msg, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

    /// A CA written to `dir/name.crt`, able to sign client certificates.
    pub struct TestCa {
        pub path: std::path::PathBuf,
        issuer: Issuer<'static, KeyPair>,
    }

    impl TestCa {
        pub fn new(dir: &Path, name: &str) -> TestCa {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let cert = params.self_signed(&key).unwrap();
            let path = dir.join(format!("{name}.crt"));
            std::fs::write(&path, cert.pem()).unwrap();
            TestCa {
                path,
                issuer: Issuer::new(params, key),
            }
        }

        /// A client certificate (DER) and its key for `cn` / `orgs`.
        pub fn client(
            &self,
            cn: &str,
            orgs: &[&str],
            usage: ExtendedKeyUsagePurpose,
        ) -> (Vec<u8>, KeyPair) {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name = rcgen::DistinguishedName::new();
            if !cn.is_empty() {
                p.distinguished_name.push(DnType::CommonName, cn);
            }
            for o in orgs {
                p.distinguished_name.push(DnType::OrganizationName, *o);
            }
            p.extended_key_usages = vec![usage];
            (p.signed_by(&key, &self.issuer).unwrap().der().to_vec(), key)
        }
    }

    #[test]
    fn a_certificate_of_the_ca_names_its_user_and_groups() {
        let tmp = tempfile::tempdir().unwrap();
        let ca = TestCa::new(tmp.path(), "cluster-ca");
        let client_ca = ClientCa::load(&ca.path).unwrap();
        let (cert, _) = ca.client(
            "kube-apiserver-kubelet-client",
            &["ops"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let user = client_ca.user(&cert).unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert_eq!(user.groups, ["ops"]);
    }

    #[test]
    fn other_cas_server_certificates_and_nameless_subjects_name_nobody() {
        let tmp = tempfile::tempdir().unwrap();
        let ca = TestCa::new(tmp.path(), "cluster-ca");
        let other = TestCa::new(tmp.path(), "other-ca");
        let client_ca = ClientCa::load(&ca.path).unwrap();
        let client = ExtendedKeyUsagePurpose::ClientAuth;
        let (foreign, _) = other.client(
            "system:masters-wannabe",
            &["system:masters"],
            client.clone(),
        );
        assert_eq!(client_ca.user(&foreign), None, "signed by another CA");
        let (serving, _) = ca.client("n1", &[], ExtendedKeyUsagePurpose::ServerAuth);
        assert_eq!(client_ca.user(&serving), None, "a serving certificate");
        let (nameless, _) = ca.client("", &["system:masters"], client);
        assert_eq!(client_ca.user(&nameless), None, "no CommonName");
        assert_eq!(client_ca.user(b"not der"), None);
    }

    #[test]
    fn an_unreadable_ca_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = ClientCa::load(&tmp.path().join("nope.crt")).unwrap_err();
        assert!(missing.to_string().contains("nope.crt"), "{missing}");
        std::fs::write(tmp.path().join("empty.crt"), "").unwrap();
        let empty = ClientCa::load(&tmp.path().join("empty.crt")).unwrap_err();
        assert!(empty.to_string().contains("empty.crt"), "{empty}");
    }
}
