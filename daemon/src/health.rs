//! /healthz (the process answers), /readyz (it has what it needs to act, e.g. its caches are
//! synced) and /metrics (Prometheus text) on one port.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("cannot listen on {addr} for /healthz, /readyz and /metrics: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("serving /healthz, /readyz and /metrics: {0}")]
    Serve(std::io::Error),
}

/// Whether the daemon is ready; /readyz answers 503 until `set_ready(true)`.
#[derive(Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Binds `addr` (the error names it) and serves until the task is dropped.
    pub async fn serve(self, addr: SocketAddr, registry: Arc<Registry>) -> Result<(), HealthError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HealthError::Bind { addr, source })?;
        axum::serve(listener, self.router(registry))
            .await
            .map_err(HealthError::Serve)
    }

    fn router(self, registry: Arc<Registry>) -> axum::Router {
        let readyz = move || {
            let ready = self.is_ready();
            async move {
                if ready {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: caches not synced",
                    )
                }
            }
        };
        axum::Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .route("/readyz", axum::routing::get(readyz))
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let registry = registry.clone();
                    async move {
                        let mut out = String::new();
                        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
                        out
                    }
                }),
            )
    }
}

/// Serves /healthz, /readyz and /metrics until the task is dropped. A port that cannot be bound
/// is logged and the daemon goes on: its work does not depend on being watched.
pub async fn serve_health_and_metrics(addr: SocketAddr, registry: Arc<Registry>, health: Health) {
    if let Err(e) = health.serve(addr, registry).await {
        tracing::warn!(error = %e, "no health and metrics endpoint");
    }
}

/// A `Health` that is ready from the start, for daemons whose caches are waited for before they
/// serve at all.
pub fn ready_now() -> Health {
    let h = Health::default();
    h.set_ready(true);
    h
}

/// A counter registered under `name` (the `_total` suffix is added by the encoder).
pub fn counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let c = Counter::default();
    registry.register(name, help, c.clone());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).await.unwrap();
        let code = text[9..12].parse().unwrap();
        (code, text)
    }

    #[tokio::test]
    async fn readyz_follows_readiness_and_metrics_are_served() {
        let mut registry = Registry::default();
        counter(&mut registry, "keelson_test_syncs", "test").inc();
        let health = Health::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = health.clone().router(Arc::new(registry));
        tokio::spawn(async move { axum::serve(listener, app).await });
        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        health.set_ready(true);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        let (code, body) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("keelson_test_syncs_total 1"), "{body}");
    }

    #[tokio::test]
    async fn a_busy_port_is_named_in_the_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = Health::default()
            .serve(addr, Arc::new(Registry::default()))
            .await
            .expect_err("port in use");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
