//! /healthz and /metrics of the scheduler.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;

pub struct Metrics {
    registry: Arc<Registry>,
    pub scheduled: Counter,
    pub unschedulable: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let (scheduled, unschedulable) = (Counter::default(), Counter::default());
        registry.register(
            "scheduler_pods_bound",
            "Pods bound to a node",
            scheduled.clone(),
        );
        registry.register(
            "scheduler_unschedulable_attempts",
            "Attempts that found no node",
            unschedulable.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            scheduled,
            unschedulable,
        }
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

pub async fn serve(addr: SocketAddr, registry: Arc<Registry>) {
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
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
        );
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => {
            if let Err(e) = axum::serve(l, app).await {
                tracing::warn!(error = %e, "metrics server stopped");
            }
        }
        Err(e) => tracing::warn!(%addr, error = %e, "cannot serve /healthz and /metrics"),
    }
}
