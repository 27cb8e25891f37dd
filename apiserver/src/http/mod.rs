//! The HTTP front: authentication, routing, content negotiation, metrics; REST work is in `rest`.

mod access_review;
pub mod attributes;
mod converted;
mod discovery;
mod escalation;
mod handlers;
pub mod kubelet_client;
mod logs;
mod resource;
mod resource_metrics;
mod route;
mod streaming;
mod token_review;

pub use route::{parse, Route};

use crate::audit::{self, Answer};
use crate::auth::{self, authorize, Tokens, User};
use crate::metrics::{LatencyLabels, Metrics, RequestLabels};
use crate::negotiate;
use crate::rest::admission::node_restriction;
use crate::rest::Api;
use crate::status::{ApiError, ApiResult};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{header, Method, StatusCode};
use keelson_daemon::PeerCertificate;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// Largest request body accepted, as upstream (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;
/// How much of a too-long body is read and dropped before the 413 (beyond it, the connection
/// is closed as it stands).
const DRAIN_BODY: usize = 4 * MAX_BODY;

pub struct App {
    pub api: Api,
    pub tokens: Tokens,
    /// Signs and verifies service-account tokens.
    pub service_accounts: auth::serviceaccount::TokenKeys,
    pub metrics: Metrics,
    /// Where each request's audit event goes (--audit-log-path).
    pub audit: audit::Audit,
    /// How pods/log connects to agents (the kubelet client certificate).
    pub kubelet: kubelet_client::KubeletClient,
    /// The authorizers of --authorization-mode.
    pub authz: authorize::Authorizer,
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

/// A request whose body has been read, once, before any handler runs.
pub struct Call {
    pub head: http::request::Parts,
    pub body: Bytes,
    /// Who sent it (system:anonymous on the public paths).
    pub user: User,
}

impl Call {
    pub fn method(&self) -> &Method {
        &self.head.method
    }

    pub fn path(&self) -> &str {
        self.head.uri.path()
    }

    pub fn query(&self) -> &str {
        self.head.uri.query().unwrap_or("")
    }

    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.head.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON, decoded from what its Content-Type says (JSON, YAML or protobuf).
    pub fn object(&self) -> ApiResult<Value> {
        negotiate::parse_body(self.header(header::CONTENT_TYPE), &self.body)
    }
}

/// Paths anyone may read, as upstream's system:public-info-viewer allows (/metrics needs
/// credentials and system:monitoring).
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/livez" | "/version")
        || path.starts_with("/healthz/")
        || path.starts_with("/readyz/")
        || path.starts_with("/livez/")
}

async fn dispatch(State(app): State<Arc<App>>, req: Request) -> Response {
    let start = Instant::now();
    let (head, body) = req.into_parts();
    let pending = audit::Pending::new(&app.audit, &head);
    // The body is read before any answer: an HTTP/2 client still sending it would otherwise
    // see its stream reset instead of the error.
    let body = read_body(body).await;
    let route = parse(head.uri.path());
    let mut asked = pending.as_ref().map(|_| asked(&head, &route));
    if let (Some(a), Ok(body)) = (asked.as_mut(), &body) {
        let content_type = head.headers.get(header::CONTENT_TYPE);
        a.name_from_body(content_type.and_then(|v| v.to_str().ok()), body);
    }
    let user = match who(&app, &head) {
        Ok(u) => u,
        Err(e) => {
            if let (Some(p), Some(a)) = (pending, asked) {
                p.unauthenticated(a, &e);
            }
            return e.into_response();
        }
    };
    let (body, unreadable) = match body {
        Ok(body) => (body, None),
        Err(e) => (Bytes::new(), Some(e)),
    };
    let call = Call { head, body, user };
    let (answer, decision) = match unreadable {
        Some(e) => (Answer::Err(e), None),
        None => serve(&app, &call, route, start).await,
    };
    if let Some(a) = asked.as_mut() {
        a.decision = decision;
    }
    match (pending, asked) {
        (Some(p), Some(a)) => p.answered(&call.user, a, answer),
        _ => answer.into_response(),
    }
}

/// An authenticated request's answer: authorization, then its handler; counted in /metrics.
/// Also the authorization decision, as the audit log names it ("allow" or "forbid").
async fn serve(
    app: &App,
    call: &Call,
    route: Option<Route>,
    start: Instant,
) -> (Answer, Option<&'static str>) {
    if let Err(e) = allowed(app, call, &route) {
        return (Answer::Err(e), Some("forbid"));
    }
    let labels = metric_labels(call.method(), &route, call.query());
    let answer = match handlers::handle(app, route, call).await {
        Ok(r) => Answer::Ok(r),
        Err(e) => {
            if e.code >= 500 {
                let (method, path) = (call.method(), call.path());
                tracing::warn!(%method, %path, code = e.code, message = %e.message, "request failed");
            }
            Answer::Err(e)
        }
    };
    record(&app.metrics, labels, answer.status(), start);
    (answer, Some("allow"))
}

/// What the audit log says a request asked for: RBAC's verb and the object it names.
fn asked(head: &http::request::Parts, route: &Option<Route>) -> audit::Asked {
    let (path, query) = (head.uri.path(), head.uri.query().unwrap_or(""));
    let a = attributes::attributes(head.method.as_str(), route, path, is_watch(query));
    audit::Asked::of(a.verb, route)
}

/// The request's user; anonymous only where upstream's public roles let anyone in. Bad
/// credentials on a public path count as none, so health probes never fail on them.
fn who(app: &App, head: &http::request::Parts) -> ApiResult<User> {
    let authorization = head
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let cert = head.extensions.get::<PeerCertificate>();
    let lookup = |plural: &str, ns: &str, name: &str| app.api.stored(plural, ns, name);
    let public = is_public(head.uri.path()) || is_cluster_info(&head.method, head.uri.path());
    match auth::authenticate(
        &app.tokens,
        &app.service_accounts,
        &lookup,
        authorization,
        cert.map(|c| c.0.as_slice()),
    ) {
        Ok(Some(user)) => Ok(user),
        Ok(None) if public => Ok(User::anonymous()),
        Err(_) if public => Ok(User::anonymous()),
        Ok(None) => Err(ApiError::unauthorized()),
        Err(e) => {
            tracing::debug!(error = %e, path = %head.uri.path(), "authentication failed");
            Err(ApiError::unauthorized())
        }
    }
}

/// kube-public/cluster-info, which joining nodes read before they have credentials.
fn is_cluster_info(method: &Method, path: &str) -> bool {
    let want = format!(
        "/api/v1/namespaces/kube-public/configmaps/{}",
        keelson_apimachinery::well_known::CLUSTER_INFO_CONFIGMAP
    );
    *method == Method::GET && path.trim_end_matches('/') == want
}

/// 403 unless the user may make this request (`auth::authorize`), NodeRestriction admits a
/// node's write, and a role or binding written grants no more than its writer holds.
fn allowed(app: &App, call: &Call, route: &Option<Route>) -> ApiResult<()> {
    let a =
        attributes::request_attributes(call.method().as_str(), route, call.path(), call.query());
    let forbidden = |message| {
        let resource = a
            .resource
            .as_ref()
            .map(|r| (r.group, r.resource, r.name.as_ref()));
        ApiError::forbidden(message, resource)
    };
    authorize::authorize(&app.authz, &call.user, &a).map_err(forbidden)?;
    node_restriction::admit(&call.user, &a, &(app, call)).map_err(forbidden)?;
    escalation::check(app, call, &a).map_err(forbidden)
}

impl node_restriction::Lookup for (&App, &Call) {
    fn body(&self) -> Option<Value> {
        self.1.object().ok()
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.0.api.stored("pods", namespace, name)
    }
}

fn is_watch(query: &str) -> bool {
    attributes::is_watch(query)
}

/// The request body, at most `MAX_BODY` bytes. A longer one is still read (up to `DRAIN_BODY`)
/// before the 413 goes out: a server that answers and closes with the client's bytes unread
/// resets the connection, and the client then sees no answer at all instead of upstream's 413.
async fn read_body(body: Body) -> ApiResult<Bytes> {
    let mut frames = body.into_data_stream();
    let mut buf = bytes::BytesMut::new();
    let mut total = 0usize;
    while let Some(chunk) = frames.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(400, "BadRequest", format!("request body unreadable: {e}"))
        })?;
        total = total.saturating_add(chunk.len());
        if total <= MAX_BODY {
            buf.extend_from_slice(&chunk);
        } else if total > DRAIN_BODY {
            break;
        }
    }
    if total > MAX_BODY {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY}"),
        ));
    }
    Ok(buf.freeze())
}

/// What /metrics counts a request under: (verb, resource, subresource).
struct MetricLabels(String, String, String);

/// The verb upstream reports for a request (LIST and WATCH are GETs of collections).
fn metric_labels(method: &Method, route: &Option<Route>, query: &str) -> MetricLabels {
    let Some(Route::Resource(rp)) = route else {
        return MetricLabels(method.as_str().to_string(), String::new(), String::new());
    };
    let watch = rp.legacy_watch || is_watch(query);
    let verb = match (method.as_str(), rp.name.is_empty()) {
        ("GET", true) if watch => "WATCH",
        ("GET", true) => "LIST",
        ("GET", false) => "GET",
        ("DELETE", true) => "DELETECOLLECTION",
        (m, _) => m,
    };
    MetricLabels(verb.to_string(), rp.res.plural.to_string(), rp.sub.clone())
}

fn record(metrics: &Metrics, labels: MetricLabels, code: StatusCode, start: Instant) {
    let MetricLabels(verb, resource, subresource) = labels;
    metrics
        .requests
        .get_or_create(&RequestLabels {
            verb: verb.clone(),
            resource: resource.clone(),
            subresource,
            code: code.as_u16().to_string(),
        })
        .inc();
    metrics
        .latency
        .get_or_create(&LatencyLabels { verb, resource })
        .observe(start.elapsed().as_secs_f64());
}
