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
}

/// Probes and scrapers need few connections at once.
const HEALTH_MAX_OPEN: usize = 64;

/// Why /healthz fails, if it does: a daemon whose work can silently stop (the proxy's syncs)
/// says so here, and a supervisor restarts it.
type LivenessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Why /readyz fails, if it does, asked on each request: for a daemon whose readiness comes and
/// goes with something it watches (the load balancer's API servers), not a one-time cache sync.
type ReadinessCheck = LivenessCheck;

/// Whether the daemon is alive and ready. /readyz answers 503 until `set_ready(true)`; /healthz
/// answers 200 unless a liveness check was given and fails (then both answer 503 with its reason).
#[derive(Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    liveness: Option<LivenessCheck>,
    readiness: Option<ReadinessCheck>,
    /// Registries served after the daemon's own (e.g. leader election's status).
    more_metrics: Vec<Arc<Registry>>,
}

impl Health {
    /// A `Health` whose /healthz (and /readyz) fail with the check's reason while it fails.
    pub fn with_liveness(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Health {
        Health {
            ready: Arc::default(),
            liveness: Some(Arc::new(check)),
            readiness: None,
            more_metrics: Vec::new(),
        }
    }

    /// Serves `registry`'s metrics too on /metrics (one exposition, one `# EOF`).
    pub fn with_metrics(mut self, registry: Arc<Registry>) -> Health {
        self.more_metrics.push(registry);
        self
    }

    /// /readyz answers 503 with the check's reason while it fails (`set_ready` is then unused).
    pub fn with_readiness(
        mut self,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Health {
        self.readiness = Some(Arc::new(check));
        self
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.not_ready().is_none()
    }

    fn not_ready(&self) -> Option<String> {
        match &self.readiness {
            Some(check) => check().err(),
            None if !self.ready.load(Ordering::Relaxed) => {
                Some("not ready: caches not synced".to_string())
            }
            None => None,
        }
    }

    fn alive(&self) -> Result<(), String> {
        self.liveness.as_ref().map_or(Ok(()), |check| check())
    }

    /// Binds `addr` (the error names it) and serves until the task is dropped.
    pub async fn serve(self, addr: SocketAddr, registry: Arc<Registry>) -> Result<(), HealthError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HealthError::Bind { addr, source })?;
        self.serve_on(listener, registry).await
    }

    /// Serves on a listener the daemon bound itself (to report a busy port its own way).
    pub async fn serve_on(
        self,
        listener: tokio::net::TcpListener,
        registry: Arc<Registry>,
    ) -> Result<(), HealthError> {
        // The same accept loop as the HTTPS servers: a scraper that connects and says nothing
        // is timed out, and accept errors back off instead of spinning.
        let limits = crate::Connections::with_max_open(HEALTH_MAX_OPEN);
        crate::serve_connections(
            listener,
            None,
            self.router(registry),
            limits,
            std::future::pending(),
        )
        .await;
        Ok(())
    }

    fn router(self, registry: Arc<Registry>) -> axum::Router {
        let mut registries = vec![registry];
        registries.extend(self.more_metrics.iter().cloned());
        let live = self.clone();
        let healthz = move || {
            let answer = match live.alive() {
                Ok(()) => (StatusCode::OK, "ok".to_string()),
                Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
            };
            async move { answer }
        };
        let readyz = move || {
            let answer = match self.alive() {
                Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                Ok(()) => match self.not_ready() {
                    Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                    None => (StatusCode::OK, "ok".to_string()),
                },
            };
            async move { answer }
        };
        axum::Router::new()
            .route("/healthz", axum::routing::get(healthz))
            .route("/readyz", axum::routing::get(readyz))
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let registries = registries.clone();
                    async move {
                        use prometheus_client::encoding::text::{encode_eof, encode_registry};
                        let mut out = String::new();
                        for r in &registries {
                            let _ = encode_registry(&mut out, r);
                        }
                        let _ = encode_eof(&mut out);
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
        let mut more = Registry::default();
        counter(&mut more, "keelson_test_more", "test").inc();
        let health = Health::default().with_metrics(Arc::new(more));
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
        assert!(body.contains("keelson_test_more_total 1"), "{body}");
        assert_eq!(body.matches("# EOF").count(), 1, "{body}");
    }

    #[tokio::test]
    async fn a_failing_liveness_check_fails_healthz_and_readyz_with_its_reason() {
        let failing = Arc::new(AtomicBool::new(true));
        let f = failing.clone();
        let health = Health::with_liveness(move || match f.load(Ordering::Relaxed) {
            true => Err("no successful sync yet".to_string()),
            false => Ok(()),
        });
        health.set_ready(true);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let registry = Arc::new(Registry::default());
        tokio::spawn(health.serve_on(listener, registry));
        let (code, body) = get(addr, "/healthz").await;
        assert_eq!(code, 503);
        assert!(body.ends_with("no successful sync yet"), "{body}");
        assert_eq!(get(addr, "/readyz").await.0, 503);
        failing.store(false, Ordering::Relaxed);
        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 200);
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
