//! A TLS client for tests and benchmarks that talk to a server below HTTP (half-sent requests,
//! connections held open): trusting the CA in a PEM file, as the server's kubeconfig does.

use std::path::Path;
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
