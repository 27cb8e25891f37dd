//! `/stats/summary` and `/metrics/resource`, what metrics-server and `kubectl top` read from a
//! kubelet (the auth layer asks for nodes/stats and nodes/metrics).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::stats::{resource_metrics, Stats};

pub fn routes(stats: Arc<Stats>) -> Router {
    Router::new()
        .route("/stats/summary", get(summary))
        .route("/metrics/resource", get(resource))
        .with_state(stats)
}

/// The Summary API; a runtime that cannot list its containers' usage is a 500, as the kubelet
/// answers, so that a scraper does not take a node without pods for the truth.
async fn summary(State(stats): State<Arc<Stats>>) -> Response {
    let collected = stats.collect().await;
    if let Some(e) = collected.error {
        let msg = format!("Internal Error: failed to get pod stats: {e}\n");
        return (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response();
    }
    match serde_json::to_string(&collected.summary) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// Resource metrics; the node's are written even when the runtime's fail (scrape_error 1).
async fn resource(State(stats): State<Arc<Stats>>) -> Response {
    let collected = stats.collect().await;
    if let Some(e) = &collected.error {
        tracing::warn!(error = %e, "resource metrics without the containers' usage");
    }
    let body = resource_metrics::render(&collected.summary, collected.error.is_some());
    (
        [(header::CONTENT_TYPE, resource_metrics::CONTENT_TYPE)],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;
    use crate::cri::Cri;
    use crate::stats::tests::{fixture, MIB, T0};

    async fn get(app: &Router, path: &str) -> (StatusCode, String, String) {
        let req = http::Request::get(path).body(Body::empty()).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let code = resp.status();
        let kind = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, kind, String::from_utf8_lossy(&body).to_string())
    }

    #[tokio::test]
    async fn summary_is_json() {
        let f = fixture().await;
        let (code, kind, body) = get(&routes(f.stats.clone()), "/stats/summary").await;
        assert_eq!((code, kind.as_str()), (StatusCode::OK, "application/json"));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["node"]["nodeName"], "n1");
        assert_eq!(v["pods"][1]["containers"][1]["name"], "sidecar");
    }

    #[tokio::test]
    async fn resource_metrics_stamped_with_when_they_were_measured() {
        let f = fixture().await;
        let (code, kind, body) = get(&routes(f.stats.clone()), "/metrics/resource").await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
        let ms = T0 / 1_000_000;
        let created = f
            .fake
            .container_status(&f.ids["app"])
            .await
            .unwrap()
            .created_at;
        let app = r#"{container="app",namespace="default",pod="web"}"#;
        let pod = r#"{namespace="default",pod="web"}"#;
        for line in [
            "# TYPE container_cpu_usage_seconds_total counter".to_string(),
            format!("container_cpu_usage_seconds_total{app} 3 {ms}"),
            format!("container_memory_working_set_bytes{app} {} {ms}", 10 * MIB),
            format!(
                "container_start_time_seconds{app} {} {}",
                created as f64 / 1e9,
                created / 1_000_000
            ),
            format!("pod_cpu_usage_seconds_total{pod} 4 {ms}"),
            format!("pod_memory_working_set_bytes{pod} {} {ms}", 15 * MIB),
            "# TYPE node_memory_working_set_bytes gauge".to_string(),
            "scrape_error 0".to_string(),
            "resource_scrape_error 0".to_string(),
        ] {
            assert!(body.lines().any(|l| l == line), "no {line:?} in\n{body}");
        }
        let node_cpu = body
            .lines()
            .find(|l| l.starts_with("node_cpu_usage_seconds_total "));
        assert!(
            node_cpu.is_some_and(|l| l.split(' ').nth(1) == Some("15")),
            "{body}"
        );
        assert!(!body.contains("pod=\"db\""), "another node's pod: {body}");
        assert!(
            !body.contains("pod=\"api\""),
            "a pod without containers: {body}"
        );
    }

    #[tokio::test]
    async fn a_failing_runtime_is_a_500_and_a_scrape_error() {
        let f = fixture().await;
        f.fake
            .container_stats_fail
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let app = routes(f.stats.clone());
        let (code, _, body) = get(&app, "/stats/summary").await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("ListContainerStats"), "{body}");
        let (code, _, body) = get(&app, "/metrics/resource").await;
        assert_eq!(code, StatusCode::OK);
        assert!(body.lines().any(|l| l == "scrape_error 1"), "{body}");
        assert!(body.contains("\nnode_memory_working_set_bytes "), "{body}");
        assert!(!body.contains("container_"), "{body}");
    }
}
