//! The accept loop: each connection served by the router over HTTP/1.1 or HTTP/2, in TLS unless
//! the server runs with --insecure-serve-http.

use crate::certs::Pki;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the serving certificate or key: {0}")]
    Pem(#[from] std::io::Error),
    #[error("no private key in apiserver.key")]
    NoKey,
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Accepts until `shutdown` resolves; connections already open run on in their tasks.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
            },
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(acc) => match acc.accept(tcp).await {
                    Ok(s) => serve_conn(TokioIo::new(s), router).await,
                    Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                },
                None => serve_conn(TokioIo::new(tcp), router).await,
            }
        });
    }
}

/// Serves one connection with the router (HTTP/1.1 and HTTP/2).
async fn serve_conn<I>(io: TokioIo<I>, app: axum::Router)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(app);
    if let Err(e) = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(io, svc)
        .await
    {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// TLS with the serving certificate, offering HTTP/2 and HTTP/1.1 by ALPN.
pub fn tls_acceptor(pki: &Pki) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<_> =
        rustls_pemfile::certs(&mut pki.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = rustls_pemfile::private_key(&mut pki.key_pem.as_bytes())?.ok_or(TlsError::NoKey)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
