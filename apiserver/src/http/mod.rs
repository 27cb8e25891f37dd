//! The HTTP front: authentication, routing, content negotiation, metrics; REST work is in `rest`.

mod discovery;
mod handlers;
mod logs;
mod route;

pub use route::{parse, Route};

use crate::auth::Tokens;
use crate::metrics::{LatencyLabels, Metrics, RequestLabels};
use crate::rest::Api;
use crate::status::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{header, Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

pub struct App {
    pub api: Api,
    pub tokens: Tokens,
    pub metrics: Metrics,
}

pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new().fallback(dispatch).with_state(app)
}

pub fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.into(),
    )
        .into_response()
}

pub fn json_value(code: StatusCode, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// Paths anyone may read, as upstream's system:public-info-viewer allows.
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/livez" | "/version" | "/metrics"
    ) || path.starts_with("/healthz/")
        || path.starts_with("/readyz/")
        || path.starts_with("/livez/")
}

async fn dispatch(State(app): State<Arc<App>>, req: Request) -> Response {
    let start = Instant::now();
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if !is_public(&path) {
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if app.tokens.authenticate(auth).is_none() {
            let _ = read_body(req).await;
            return ApiError::unauthorized().into_response();
        }
    }
    // The body is read before any answer: an HTTP/2 client still sending it would otherwise
    // see its stream reset instead of the error.
    let req = match read_body(req).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let route = parse(&path);
    let (verb, resource, sub) = labels(&method, &route, req.uri().query().unwrap_or(""));
    let resp = match handlers::handle(&app, route, req).await {
        Ok(r) => r,
        Err(e) => {
            if e.code >= 500 {
                tracing::warn!(%method, %path, code = e.code, message = %e.message, "request failed");
            }
            e.into_response()
        }
    };
    let code = resp.status().as_u16().to_string();
    app.metrics
        .requests
        .get_or_create(&RequestLabels {
            verb: verb.clone(),
            resource: resource.clone(),
            subresource: sub,
            code,
        })
        .inc();
    app.metrics
        .latency
        .get_or_create(&LatencyLabels { verb, resource })
        .observe(start.elapsed().as_secs_f64());
    resp
}

async fn read_body(req: Request) -> Result<Request, ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 3 * 1024 * 1024)
        .await
        .map_err(|e| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("request body too large or unreadable: {e}"),
            )
        })?;
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The verb upstream reports for a request (LIST and WATCH are GETs of collections).
fn labels(method: &Method, route: &Option<Route>, query: &str) -> (String, String, String) {
    let Some(Route::Resource(rp)) = route else {
        return (method.as_str().to_string(), String::new(), String::new());
    };
    let watch = rp.legacy_watch
        || query
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method.as_str(), rp.name.is_empty()) {
        ("GET", true) if watch => "WATCH",
        ("GET", true) => "LIST",
        ("GET", false) => "GET",
        ("POST", _) => "POST",
        ("PUT", _) => "PUT",
        ("PATCH", _) => "PATCH",
        ("DELETE", true) => "DELETECOLLECTION",
        ("DELETE", false) => "DELETE",
        (m, _) => m,
    };
    (verb.to_string(), rp.res.plural.to_string(), rp.sub.clone())
}
