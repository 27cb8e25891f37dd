//! Maps (method, route) to discovery documents and REST operations.

use super::route::{ResourcePath, Route};
use super::{discovery, json_response, json_value, logs, App};
use crate::negotiate::{self, Output};
use crate::render;
use crate::rest::{self, DeleteOptions, ListParams, Sub, Target};
use crate::status::{ApiError, ApiResult};
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{header, Method, StatusCode};
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

/// Largest request body accepted, as upstream (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

pub async fn handle(app: &App, route: Option<Route>, req: Request) -> ApiResult<Response> {
    let path = req.uri().path().to_string();
    let get = req.method() == Method::GET;
    match (path.as_str(), route) {
        ("/healthz" | "/livez" | "/readyz", _) => Ok(json_response(StatusCode::OK, "ok")),
        ("/version", _) => Ok(json_value(StatusCode::OK, &discovery::version())),
        ("/metrics", _) => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            app.metrics.encode(),
        )
            .into_response()),
        // kubectl fetches the OpenAPI document before every apply; an empty protobuf body makes
        // it rely on server-side validation, which this server does.
        ("/openapi/v2", _) => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            "",
        )
            .into_response()),
        (_, Some(Route::CoreVersions | Route::Groups))
            if get && discovery::wants_aggregated(header_str(&req, header::ACCEPT)) =>
        {
            let core = path.trim_end_matches('/') == "/api";
            let body = serde_json::to_vec(&discovery::aggregated(core)).unwrap_or_default();
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, discovery::AGGREGATED)],
                body,
            )
                .into_response())
        }
        (_, Some(Route::CoreVersions)) if get => {
            Ok(json_value(StatusCode::OK, &discovery::core_versions()))
        }
        (_, Some(Route::Groups)) if get => Ok(json_value(StatusCode::OK, &discovery::groups())),
        (_, Some(Route::Group(g))) if get => discovery::group(&g)
            .map(|v| json_value(StatusCode::OK, &v))
            .ok_or_else(|| ApiError::no_route(&path)),
        (_, Some(Route::ResourceList { group, version })) if get => Ok(json_value(
            StatusCode::OK,
            &discovery::resource_list(&group, &version),
        )),
        (_, Some(Route::Resource(rp))) => resource(app, rp, req).await,
        _ => Err(ApiError::no_route(&path)),
    }
}

fn header_str(req: &Request, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn body_bytes(req: Request) -> ApiResult<bytes::Bytes> {
    axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("request body too large or unreadable: {e}"),
            )
        })
}

fn params(req: &Request) -> ApiResult<ListParams> {
    let q = req.uri().query().unwrap_or("");
    serde_urlencoded::from_str(q)
        .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))
}

async fn resource(app: &App, rp: ResourcePath, req: Request) -> ApiResult<Response> {
    let api = &app.api;
    let p = params(&req)?;
    let out = negotiate::output(header_str(&req, header::ACCEPT));
    let include = p.include_object.as_deref() != Some("None");
    let dry_run = p.dry_run.as_deref().is_some_and(|d| !d.is_empty());
    let t = Target {
        res: rp.res,
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
    };
    let obj =
        |e: &crate::store::Entry, code| json_response(code, render::object(t.res, e, out, include));
    let method = req.method().clone();
    match (method, rp.name.is_empty(), rp.sub.as_str()) {
        (Method::GET, true, "") if rp.legacy_watch || rest::read_is_watch(&p) => {
            let rx = rest::watch(api, &t, &p, out)?;
            let metrics_guard = WatchGauge::new(app);
            let stream = ReceiverStream::new(rx).map(move |b| {
                let _ = &metrics_guard;
                Ok::<_, std::convert::Infallible>(b)
            });
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CACHE_CONTROL, "no-cache, private")
                .body(Body::from_stream(stream))
                .map_err(|e| ApiError::internal(e.to_string()))?)
        }
        (Method::GET, true, "") => {
            let page = rest::list(api, &t, &p)?;
            let body = render::list(
                t.res,
                &page.items,
                page.rev,
                page.continue_.as_deref(),
                page.remaining,
                out,
                include,
            );
            Ok(json_response(StatusCode::OK, body))
        }
        (Method::GET, false, "" | "status") => Ok(obj(&rest::get(api, &t)?, StatusCode::OK)),
        (Method::GET, false, "scale") => Ok(json_value(StatusCode::OK, &rest::get_scale(api, &t)?)),
        (Method::GET, false, "log") => {
            logs::pod_logs(api, &t, req.uri().query().unwrap_or("")).await
        }
        (Method::POST, true, "") => {
            let ct = header_str(&req, header::CONTENT_TYPE).map(String::from);
            let body = negotiate::parse_body(ct.as_deref(), &body_bytes(req).await?)?;
            let e = rest::create(api, t.res, &t.namespace, body, dry_run).await?;
            Ok(obj(&e, StatusCode::CREATED))
        }
        (Method::POST, false, "binding") => {
            let ct = header_str(&req, header::CONTENT_TYPE).map(String::from);
            let body = negotiate::parse_body(ct.as_deref(), &body_bytes(req).await?)?;
            rest::bind(api, &t, &body).await?;
            Ok(json_value(StatusCode::CREATED, &success()))
        }
        (Method::PUT, false, sub @ ("" | "status" | "finalize")) => {
            let sub = if sub == "status" {
                Sub::Status
            } else {
                Sub::Main
            };
            let ct = header_str(&req, header::CONTENT_TYPE).map(String::from);
            let body = negotiate::parse_body(ct.as_deref(), &body_bytes(req).await?)?;
            let e = rest::update(api, &t, body, sub, dry_run).await?;
            Ok(obj(&e, StatusCode::OK))
        }
        (Method::PUT, false, "scale") => {
            let ct = header_str(&req, header::CONTENT_TYPE).map(String::from);
            let body = negotiate::parse_body(ct.as_deref(), &body_bytes(req).await?)?;
            Ok(json_value(
                StatusCode::OK,
                &rest::update_scale(api, &t, &body, None).await?,
            ))
        }
        (Method::PATCH, false, sub @ ("" | "status" | "scale")) => {
            let ct = header_str(&req, header::CONTENT_TYPE).map(String::from);
            let kind = negotiate::patch_type(ct.as_deref())?;
            let body = negotiate::parse_body(ct.as_deref(), &body_bytes(req).await?)?;
            if sub == "scale" {
                return Ok(json_value(
                    StatusCode::OK,
                    &rest::update_scale(api, &t, &body, Some(kind)).await?,
                ));
            }
            let sub = if sub == "status" {
                Sub::Status
            } else {
                Sub::Main
            };
            let e = rest::patch(api, &t, kind, body, sub, dry_run).await?;
            Ok(obj(&e, StatusCode::OK))
        }
        (Method::DELETE, collection, "") => {
            let query_opts = DeleteOptions {
                grace_period_seconds: p.grace_period_seconds,
                propagation_policy: p.propagation_policy.clone(),
                ..Default::default()
            };
            let bytes = body_bytes(req).await?;
            let mut opts: DeleteOptions = if bytes.iter().all(u8::is_ascii_whitespace) {
                DeleteOptions::default()
            } else {
                serde_json::from_slice(&bytes)
                    .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
            };
            opts.grace_period_seconds = opts
                .grace_period_seconds
                .or(query_opts.grace_period_seconds);
            opts.propagation_policy = opts.propagation_policy.or(query_opts.propagation_policy);
            if collection {
                let items = rest::delete_collection(api, &t, &p, &opts).await?;
                let list = render::list(
                    t.res,
                    &items,
                    api.store.current_rev(),
                    None,
                    None,
                    Output::Json,
                    true,
                );
                return Ok(json_response(StatusCode::OK, list));
            }
            let e = rest::delete(api, &t, &opts).await?;
            Ok(obj(&e, StatusCode::OK))
        }
        (m, _, sub) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({m} {}{})",
            t.res.plural,
            if sub.is_empty() {
                String::new()
            } else {
                format!("/{sub}")
            }
        ))),
    }
}

fn success() -> Value {
    serde_json::json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 })
}

/// Counts open watches for /metrics while a watch stream lives.
struct WatchGauge(prometheus_client::metrics::gauge::Gauge<i64, std::sync::atomic::AtomicI64>);

impl WatchGauge {
    fn new(app: &App) -> WatchGauge {
        app.metrics.watchers.inc();
        WatchGauge(app.metrics.watchers.clone())
    }
}

impl Drop for WatchGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}
