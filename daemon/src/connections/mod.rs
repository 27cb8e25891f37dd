//! The accept loop of Keelson's HTTPS servers (the API server and the agent's port 10250):
//! HTTP/1.1 and HTTP/2 by ALPN, with upgrades (exec, port-forward), and limits so that clients
//! that connect and say nothing cannot use up the process's file descriptors: a TLS handshake
//! timeout, a header-read timeout, a cap on open connections, back-off with rate-limited
//! logging when accept fails, and the soft limit on open files raised to the hard one.

mod accept;
mod fd_limit;
mod first_bytes;
mod settings;

pub use accept::RateLimitedLog;
pub use fd_limit::raise_open_files_limit;
pub use settings::{Connections, HANDSHAKE_TIMEOUT_ENV, HEADER_READ_TIMEOUT_ENV, MAX_OPEN_ENV};

use std::future::Future;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;

use accept::Acceptor;
use first_bytes::FirstBytesDeadline;

/// The DER leaf certificate a TLS client presented, as far as the server's client certificate
/// verifier checked it (servers that request none never see one). The API server's verifies the
/// chain; the agent's only that the client holds the key, and judges the chain per request.
#[derive(Clone, Debug)]
pub struct PeerCertificate(pub Arc<Vec<u8>>);

/// The client's address (the TCP peer), on every request as an `Extension<RemoteAddr>`: audit
/// logs name it as upstream's sourceIPs do.
#[derive(Clone, Copy, Debug)]
pub struct RemoteAddr(pub std::net::SocketAddr);

impl PeerCertificate {
    fn of<I>(stream: &tokio_rustls::server::TlsStream<I>) -> Option<PeerCertificate> {
        let (_, conn) = stream.get_ref();
        let leaf = conn.peer_certificates()?.first()?;
        Some(PeerCertificate(Arc::new(leaf.as_ref().to_vec())))
    }
}

/// What every connection is served with.
struct Server {
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    http: auto::Builder<TokioExecutor>,
    limits: Connections,
}

/// Serves `app` on `listener` (in TLS when `tls` is given) until `shutdown` resolves;
/// connections already open run on in their tasks.
pub async fn serve_connections(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    limits: Connections,
    shutdown: impl Future<Output = ()>,
) {
    raise_open_files_limit();
    let mut acceptor = Acceptor::new(listener, limits.max_open);
    let server = Arc::new(Server {
        tls,
        app,
        http: http_builder(&limits),
        limits,
    });
    tokio::pin!(shutdown);
    loop {
        let (tcp, permit) = tokio::select! {
            _ = &mut shutdown => return,
            next = acceptor.next() => next,
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(server.clone().serve(tcp, permit));
    }
}

fn http_builder(limits: &Connections) -> auto::Builder<TokioExecutor> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    http.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.ping_interval)
        .keep_alive_timeout(limits.ping_timeout);
    http
}

impl Server {
    /// One connection, holding its place under the cap until it closes.
    async fn serve(self: Arc<Self>, tcp: TcpStream, _permit: Option<OwnedSemaphorePermit>) {
        let remote = tcp.peer_addr().ok().map(RemoteAddr);
        let Some(acceptor) = &self.tls else {
            return self.serve_http(tcp, None, remote).await;
        };
        match tokio::time::timeout(self.limits.handshake_timeout, acceptor.accept(tcp)).await {
            Ok(Ok(stream)) => {
                let peer = PeerCertificate::of(&stream);
                self.serve_http(stream, peer, remote).await
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(
                timeout = ?self.limits.handshake_timeout,
                "TLS handshake timed out"
            ),
        }
    }

    /// Serves HTTP on `io`; each request carries the client's verified certificate, if any,
    /// as an `Extension<PeerCertificate>`, and its address as an `Extension<RemoteAddr>`.
    async fn serve_http<I>(&self, io: I, peer: Option<PeerCertificate>, remote: Option<RemoteAddr>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = FirstBytesDeadline::new(io, self.limits.header_read_timeout);
        let mut app = self.app.clone();
        if let Some(p) = peer {
            app = app.layer(axum::Extension(p));
        }
        if let Some(r) = remote {
            app = app.layer(axum::Extension(r));
        }
        let service = TowerToHyperService::new(app);
        if let Err(e) = self
            .http
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .await
        {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    }
}
