//! What the Keelson daemons that are ordinary API clients (controller manager, scheduler, ingress)
//! share: log setup, the client from a kubeconfig, and the /healthz + /metrics endpoint.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no kubeconfig given and none found ($KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error(transparent)]
    Client(#[from] kube::Error),
}

/// Logs to stderr at the level RUST_LOG asks for (default info).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}

/// A client from `--kubeconfig`, else as kubectl finds one: $KUBECONFIG, then in-cluster.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let wrap = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(wrap)?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Serves /healthz ("ok") and /metrics (Prometheus text) until the task is dropped. A port that
/// cannot be bound is logged and the daemon goes on: its work does not depend on being watched.
pub async fn serve_health_and_metrics(addr: SocketAddr, registry: Arc<Registry>) {
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

/// A counter registered under `name` (the `_total` suffix is added by the encoder).
pub fn counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let c = Counter::default();
    registry.register(name, help, c.clone());
    c
}
