//! Serving: keelson-daemon's accept loop (handshake and header timeouts, a cap on open
//! connections, back-off on accept errors), in TLS unless the server runs with
//! --insecure-serve-http; and the TLS configuration.

use crate::certs::Pki;
use keelson_daemon::Connections;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Connections open at once (KEELSON_MAX_OPEN_CONNECTIONS overrides it): idle clients beyond
/// it wait in the accept queue instead of using up file descriptors.
pub const MAX_OPEN_CONNECTIONS: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the serving certificate or key: {0}")]
    Pem(#[from] std::io::Error),
    #[error("no private key in apiserver.key")]
    NoKey,
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("the client CA file (--client-ca-file) holds no PEM certificate")]
    NoClientCa,
    #[error("client certificate verification: {0}")]
    ClientVerifier(String),
}

/// Accepts until `shutdown` resolves; connections already open run on in their tasks.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    shutdown: impl Future<Output = ()>,
) {
    let limits = Connections::with_max_open(MAX_OPEN_CONNECTIONS).from_env();
    keelson_daemon::serve_connections(listener, tls, router, limits, shutdown).await
}

/// TLS with the serving certificate, offering HTTP/2 and HTTP/1.1 by ALPN. A client may
/// present a certificate, which must then be signed by `client_ca_pem` (its user is read in
/// `auth::x509`); clients without one still connect and use bearer tokens.
pub fn tls_acceptor(pki: &Pki, client_ca_pem: &str) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<_> =
        rustls_pemfile::certs(&mut pki.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut pki.key_pem.as_bytes())?.ok_or(TlsError::NoKey)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls_pemfile::certs(&mut client_ca_pem.as_bytes()) {
        roots.add(ca?)?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoClientCa);
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| TlsError::ClientVerifier(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
