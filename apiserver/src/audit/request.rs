//! An audit event from a request: what is known when it arrives (id, URI, agent, addresses,
//! time), completed with who sent it, what it asked for and the answer.

use super::{micro_time, Audit, Event, ObjectRef, ResponseStatus, UserInfo};
use crate::auth::User;
use crate::http::Route;
use crate::status::ApiError;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::header;
use keelson_daemon::RemoteAddr;

/// A request being served, for its event.
pub struct Pending {
    audit: Audit,
    id: String,
    uri: String,
    user_agent: String,
    source_ips: Vec<String>,
    received: chrono::DateTime<chrono::Utc>,
}

/// What the request asked for: its verb (RBAC's) and the object it names, if any; and what
/// the authorizer decided ("allow", "forbid"), once it has.
pub struct Asked {
    pub verb: String,
    pub object: Option<ObjectRef>,
    pub decision: Option<&'static str>,
}

impl Asked {
    pub fn of(verb: &str, route: &Option<Route>) -> Asked {
        let object = match route {
            Some(Route::Resource(rp)) => Some(ObjectRef {
                resource: rp.res.plural.to_string(),
                namespace: rp.namespace.clone(),
                name: rp.name.clone(),
                api_group: rp.res.group.to_string(),
                api_version: rp.res.version.to_string(),
                subresource: rp.sub.clone(),
            }),
            _ => None,
        };
        Asked {
            verb: verb.to_string(),
            object,
            decision: None,
        }
    }
}

impl Asked {
    /// A create names its object in the body, not the URL: the name goes into objectRef as
    /// upstream records it.
    pub fn name_from_body(&mut self, content_type: Option<&str>, body: &[u8]) {
        let Some(object) = self.object.as_mut() else {
            return;
        };
        if self.verb != "create" || !object.name.is_empty() || !object.subresource.is_empty() {
            return;
        }
        if let Ok(obj) = crate::negotiate::parse_body(content_type, body) {
            object.name = crate::object::name(&obj).to_string();
        }
    }
}

impl Pending {
    /// None when the audit log is off.
    pub fn new(audit: &Audit, head: &http::request::Parts) -> Option<Pending> {
        if !audit.enabled() {
            return None;
        }
        let text = |name| {
            head.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        Some(Pending {
            audit: audit.clone(),
            id: uuid::Uuid::new_v4().to_string(),
            // HTTP/2 requests carry scheme and authority too; upstream logs path and query.
            uri: head
                .uri
                .path_and_query()
                .map_or_else(|| head.uri.path().to_string(), |p| p.to_string()),
            user_agent: text(header::USER_AGENT).to_string(),
            source_ips: source_ips(head),
            received: chrono::Utc::now(),
        })
    }

    /// Logs a request whose credentials were refused (upstream logs it as ResponseStarted,
    /// without a user).
    pub fn unauthenticated(self, asked: Asked, e: &ApiError) {
        let status = failure(e);
        let event = self.event(None, asked, status, "ResponseStarted");
        self.audit.log(event);
    }

    /// Logs the answer to an authenticated request. A watch's stream is logged twice, as
    /// upstream does: ResponseStarted now and ResponseComplete when the stream ends.
    pub fn answered(self, user: &User, asked: Asked, answer: Answer) -> Response {
        let (mut resp, status) = match answer {
            Answer::Ok(resp) => {
                let status = ResponseStatus {
                    code: resp.status().as_u16(),
                    ..Default::default()
                };
                (resp, status)
            }
            Answer::Err(e) => {
                let status = failure(&e);
                (e.into_response(), status)
            }
        };
        let found = resp.extensions_mut().remove::<super::Annotations>();
        if asked.verb != "watch" || !resp.status().is_success() {
            let mut event = self.event(Some(user), asked, status, "ResponseComplete");
            event
                .annotations
                .extend(found.into_iter().flat_map(|a| a.0));
            self.audit.log(event);
            return resp;
        }
        let started = self.event(Some(user), asked, status, "ResponseStarted");
        self.audit.log(started.clone());
        let end = WatchEnd {
            audit: self.audit.clone(),
            event: started,
        };
        let (parts, body) = resp.into_parts();
        let body = body.into_data_stream().map(move |chunk| {
            let _ = &end;
            chunk
        });
        Response::from_parts(parts, Body::from_stream(body))
    }

    fn event(
        &self,
        user: Option<&User>,
        asked: Asked,
        status: ResponseStatus,
        stage: &'static str,
    ) -> Event {
        let user = user
            .map(|u| UserInfo {
                username: u.name.clone(),
                uid: u.uid.clone(),
                groups: u.groups.clone(),
            })
            .unwrap_or_default();
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: "Metadata",
            audit_id: self.id.clone(),
            stage,
            request_uri: self.uri.clone(),
            verb: asked.verb,
            user,
            source_ips: self.source_ips.clone(),
            user_agent: self.user_agent.clone(),
            object_ref: asked.object,
            response_status: status,
            request_received_timestamp: micro_time(self.received),
            stage_timestamp: micro_time(chrono::Utc::now()),
            annotations: asked
                .decision
                .map(|d| (DECISION_ANNOTATION, d.to_string()))
                .into_iter()
                .collect(),
        }
    }
}

/// The audit annotation upstream's authorization filter sets on every authorized request.
const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";

/// A handler's result, before it becomes a response.
pub enum Answer {
    Ok(Response),
    Err(ApiError),
}

impl Answer {
    pub fn status(&self) -> http::StatusCode {
        match self {
            Answer::Ok(r) => r.status(),
            Answer::Err(e) => http::StatusCode::from_u16(e.code)
                .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
}

impl axum::response::IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self {
            Answer::Ok(r) => r,
            Answer::Err(e) => e.into_response(),
        }
    }
}

fn failure(e: &ApiError) -> ResponseStatus {
    ResponseStatus {
        status: "Failure".into(),
        message: e.message.clone(),
        reason: e.reason.into(),
        code: e.code,
        ..Default::default()
    }
}

/// Logs a watch's ResponseComplete when its stream is dropped (ended or the client left).
struct WatchEnd {
    audit: Audit,
    event: Event,
}

impl Drop for WatchEnd {
    fn drop(&mut self) {
        let mut event = self.event.clone();
        event.stage = "ResponseComplete";
        event.stage_timestamp = micro_time(chrono::Utc::now());
        self.audit.log(event);
    }
}

/// As upstream's SourceIPs: X-Forwarded-For's addresses, X-Real-Ip, then the peer, each once.
fn source_ips(head: &http::request::Parts) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let header = |name: &str| {
        head.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let forwarded = header("x-forwarded-for").split(',');
    let real = std::iter::once(header("x-real-ip"));
    for ip in forwarded.chain(real) {
        let ip = ip.trim();
        if ip.parse::<std::net::IpAddr>().is_ok() && !ips.iter().any(|i| i == ip) {
            ips.push(ip.to_string());
        }
    }
    if let Some(RemoteAddr(addr)) = head.extensions.get::<RemoteAddr>() {
        let ip = addr.ip().to_canonical().to_string();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}
