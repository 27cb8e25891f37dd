//! Maps a path to what answers it: the fixed paths (health, version, metrics, OpenAPI),
//! discovery documents, or the REST verbs of a resource (`resource.rs`).

use super::route::Route;
use super::{discovery, json_response, json_value, resource, App, Call};
use crate::status::{ApiError, ApiResult};
use axum::response::{IntoResponse, Response};
use http::{header, Method, StatusCode};

pub async fn handle(app: &App, route: Option<Route>, call: &Call) -> ApiResult<Response> {
    // The etcd health check comes before `fixed_path`, which would answer /healthz and /readyz
    // "ok" without asking etcd. Only the health paths wait for it: every other fixed path and
    // discovery answer while etcd is down, and a resource request learns of an outage from its
    // own read or write (503).
    if let Some(health) = HealthPath::of(call.path()) {
        if let Some(resp) = storage_health(app, call, health).await {
            return Ok(resp);
        }
    }
    if let Some(resp) = fixed_path(app, call.path()) {
        return Ok(resp);
    }
    if call.method() == Method::GET && call.path().starts_with("/openapi/") {
        let (path, query, headers) = (call.path(), call.query(), &call.head.headers);
        let custom = crate::openapi::custom_kinds();
        if let Some(resp) = crate::openapi::endpoints::respond(path, query, headers, &custom) {
            return Ok(resp);
        }
    }
    if call.path().trim_end_matches('/') == super::attributes::SELF_SUBJECT_REVIEWS {
        return self_subject_review(call);
    }
    match route {
        Some(Route::Resource(rp)) if rp.res.group == "authorization.k8s.io" => {
            super::access_review::handle(app, &rp, call)
        }
        Some(Route::Resource(rp)) if rp.res.kind == "TokenReview" => {
            super::token_review::token_review(app, call)
        }
        Some(Route::Resource(rp)) if crate::resources::is_converted(rp.res) => {
            super::converted::handle(app, rp, call).await
        }
        Some(Route::Resource(rp)) if rp.res.is_metrics() => {
            super::resource_metrics::handle(&app.api, &app.kubelet, &rp, call).await
        }
        Some(Route::Resource(rp)) => resource::handle(app, rp, call).await,
        Some(route) if call.method() == Method::GET => discovery_document(route, call),
        _ => Err(ApiError::no_route(call.path())),
    }
}

/// A health path that includes upstream's `etcd` check: /healthz or /readyz, or the check alone
/// (/healthz/etcd, /readyz/etcd).
#[derive(Debug, PartialEq)]
struct HealthPath<'a> {
    name: &'a str,
    only_etcd: bool,
}

impl HealthPath<'_> {
    fn of(path: &str) -> Option<HealthPath<'_>> {
        let (name, only_etcd) = match path.strip_suffix("/etcd") {
            Some(p @ ("/readyz" | "/healthz")) => (p, true),
            _ if matches!(path, "/readyz" | "/healthz") => (path, false),
            _ => return None,
        };
        Some(HealthPath { name, only_etcd })
    }
}

/// The health path's answer with the `etcd` check when etcd is the store; None for the local
/// store, whose health is the process's.
async fn storage_health(app: &App, call: &Call, health: HealthPath<'_>) -> Option<Response> {
    let HealthPath { name, only_etcd } = health;
    let timeout = std::time::Duration::from_secs(2);
    let check = tokio::time::timeout(timeout, app.api.store.check()).await;
    let failed = match check {
        Ok(None) => return None,
        Ok(Some(Ok(()))) => None,
        Ok(Some(Err(e))) => Some(e.to_string()),
        Err(_) => Some(format!("etcd did not answer within {}s", timeout.as_secs())),
    };
    let check = name.trim_start_matches('/');
    let verbose = call
        .query()
        .split('&')
        .any(|q| q == "verbose" || q.starts_with("verbose="));
    let (code, body) = match (failed, only_etcd, verbose) {
        (None, true, _) | (None, false, false) => (StatusCode::OK, "ok".to_string()),
        (None, false, true) => (
            StatusCode::OK,
            format!("[+]ping ok\n[+]etcd ok\n{check} check passed\n"),
        ),
        (Some(why), _, _) => {
            tracing::warn!(error = %why, "{check}: the etcd check failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("[+]ping ok\n[-]etcd failed: reason withheld\n{check} check failed\n"),
            )
        }
    };
    Some(
        (
            code,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body,
        )
            .into_response(),
    )
}

fn fixed_path(app: &App, path: &str) -> Option<Response> {
    Some(match path {
        "/healthz" | "/livez" | "/readyz" => json_response(StatusCode::OK, "ok"),
        "/version" => json_value(StatusCode::OK, &discovery::version()),
        "/metrics" => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            app.metrics.encode(),
        )
            .into_response(),
        _ => return None,
    })
}

/// POST authentication.k8s.io/v1 SelfSubjectReview: the requester as the server authenticated
/// them (`kubectl auth whoami`).
fn self_subject_review(call: &Call) -> ApiResult<Response> {
    if call.method() != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} selfsubjectreviews)",
            call.method()
        )));
    }
    let u = &call.user;
    let mut info = serde_json::json!({ "username": u.name, "groups": u.groups });
    if !u.uid.is_empty() {
        crate::object::set_path(&mut info, &["uid"], serde_json::json!(u.uid));
    }
    let review = serde_json::json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": { "creationTimestamp": null },
        "status": { "userInfo": info },
    });
    Ok(json_value(StatusCode::CREATED, &review))
}

/// GET of /api, /apis, a group or a group version.
fn discovery_document(route: Route, call: &Call) -> ApiResult<Response> {
    let ok = |v: &serde_json::Value| json_value(StatusCode::OK, v);
    let top = matches!(route, Route::CoreVersions | Route::Groups);
    if top && discovery::wants_aggregated(call.header(header::ACCEPT)) {
        let core = call.path().trim_end_matches('/') == "/api";
        let body = serde_json::to_vec(&discovery::aggregated(core)).unwrap_or_default();
        let content_type = [(header::CONTENT_TYPE, discovery::AGGREGATED)];
        return Ok((StatusCode::OK, content_type, body).into_response());
    }
    match route {
        Route::CoreVersions => Ok(ok(&discovery::core_versions())),
        Route::Groups => Ok(ok(&discovery::groups())),
        Route::Group(g) => discovery::group(&g)
            .map(|v| ok(&v))
            .ok_or_else(|| ApiError::no_route(call.path())),
        Route::ResourceList { group, version } => {
            Ok(ok(&discovery::resource_list(&group, &version)))
        }
        Route::Resource(_) => Err(ApiError::no_route(call.path())),
    }
}

#[cfg(test)]
mod tests {
    use super::HealthPath;

    #[test]
    fn only_the_health_paths_wait_for_the_etcd_check() {
        let health = |name, only_etcd| Some(HealthPath { name, only_etcd });
        assert_eq!(HealthPath::of("/readyz"), health("/readyz", false));
        assert_eq!(HealthPath::of("/healthz"), health("/healthz", false));
        assert_eq!(HealthPath::of("/readyz/etcd"), health("/readyz", true));
        assert_eq!(HealthPath::of("/healthz/etcd"), health("/healthz", true));
        for other in ["/version", "/apis", "/metrics", "/api/v1/pods", "/etcd"] {
            assert_eq!(HealthPath::of(other), None, "{other}");
        }
    }
}
