//! A TLS client for tests and benchmarks that talk to a server below HTTP (half-sent requests,
//! connections held open): trusting the CA in a PEM file, as the server's kubeconfig does. And
//! test certificates: a CA with a serving and a client certificate, e.g. for etcd with TLS.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::TlsConnector;

/// A connector that trusts the certificates in `ca_pem_file` (e.g. the API server's ca.crt).
pub fn connector(ca_pem_file: &Path) -> TlsConnector {
    let pem = std::fs::read(ca_pem_file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", ca_pem_file.display()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.unwrap_or_else(|e| panic!("{}: {e}", ca_pem_file.display()));
        roots
            .add(cert)
            .unwrap_or_else(|e| panic!("{}: {e}", ca_pem_file.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// PEM files of a test CA, a serving certificate for 127.0.0.1 and localhost, and a client
/// certificate, all signed by the CA.
#[derive(Debug, Clone)]
pub struct TestPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Writes a `TestPki` into `dir`; the client certificate's CN is `client_cn`.
pub fn test_pki(dir: &Path, client_cn: &str) -> TestPki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let params = |cn: &str, sans: &[&str]| {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(sans).expect("test certificate names");
        p.distinguished_name.push(DnType::CommonName, cn);
        p
    };
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    };
    let mut ca = params("keelson-test-ca", &[]);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("a CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("the test CA");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |cn: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose, name: &str| {
        let mut p = params(cn, sans);
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("a key");
        let cert = p.signed_by(&key, &issuer).expect("a test certificate");
        (
            write(&format!("{name}.crt"), cert.pem()),
            write(&format!("{name}.key"), key.serialize_pem()),
        )
    };
    let server_sans = ["127.0.0.1", "localhost"];
    let server = ExtendedKeyUsagePurpose::ServerAuth;
    let (server_cert, server_key) = leaf("server", &server_sans, server, "server");
    let client = ExtendedKeyUsagePurpose::ClientAuth;
    let (client_cert, client_key) = leaf(client_cn, &[], client, "client");
    TestPki {
        ca: write("ca.crt", ca_cert.pem()),
        server_cert,
        server_key,
        client_cert,
        client_key,
    }
}
