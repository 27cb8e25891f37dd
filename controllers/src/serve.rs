//! /healthz and /metrics of the controller manager.

use crate::Ctx;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;

pub struct Metrics {
    registry: Registry,
    pub reconciles: Counter,
    pub errors: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let (reconciles, errors) = (Counter::default(), Counter::default());
        registry.register(
            "keelson_controller_reconciles",
            "Reconciles finished",
            reconciles.clone(),
        );
        registry.register(
            "keelson_controller_reconcile_errors",
            "Reconciles that failed and were retried",
            errors.clone(),
        );
        Metrics {
            registry,
            reconciles,
            errors,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

pub async fn serve(addr: SocketAddr, ctx: Arc<Ctx>) {
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/metrics",
            axum::routing::get(move || {
                let ctx = ctx.clone();
                async move {
                    let mut out = String::new();
                    let _ =
                        prometheus_client::encoding::text::encode(&mut out, &ctx.metrics.registry);
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
