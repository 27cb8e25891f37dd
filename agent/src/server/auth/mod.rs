//! Who may use port 10250, decided as the kubelet decides with --anonymous-auth=false,
//! --client-ca-file, --authentication-token-webhook and --authorization-mode=Webhook: a client
//! certificate from the client CA, else a bearer token the API server vouches for (TokenReview),
//! else 401 (or system:anonymous with --anonymous-auth=true); then a SubjectAccessReview on a
//! subresource of this Node (`attributes`), 403 when not allowed. Answers are cached briefly.
//! /healthz stays open, for probes.

pub mod attributes;
pub mod cache;
pub mod review;
pub mod x509;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use keelson_daemon::connections::PeerCertificate;
use tokio::time::Instant;

use attributes::Attributes;
use cache::{TtlCache, Ttls};
use review::{Decision, Reviews, UserInfo};
use x509::ClientCa;

/// Paths served to anyone.
const OPEN_PATHS: [&str; 1] = ["/healthz"];

/// What the port's checks are configured with.
pub struct Settings {
    pub node_name: String,
    /// --client-ca-file; without it client certificates authenticate nobody.
    pub client_ca: Option<ClientCa>,
    /// --anonymous-auth: requests without credentials are system:anonymous instead of 401.
    pub anonymous: bool,
    pub ttls: Ttls,
}

pub struct PortAuth {
    settings: Settings,
    reviews: Arc<dyn Reviews>,
    tokens: TtlCache<String, Option<UserInfo>>,
    decisions: TtlCache<(UserInfo, Attributes), Decision>,
}

/// Why a request is turned away, answered as the kubelet answers.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    Unauthorized,
    Forbidden(String),
    AuthorizationError(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (code, text) = match self {
            Refusal::Unauthorized => (StatusCode::UNAUTHORIZED, "Unauthorized".to_string()),
            Refusal::Forbidden(t) => (StatusCode::FORBIDDEN, t),
            Refusal::AuthorizationError(t) => (StatusCode::INTERNAL_SERVER_ERROR, t),
        };
        (code, [(header::CONTENT_TYPE, "text/plain")], text).into_response()
    }
}

impl PortAuth {
    pub fn new(settings: Settings, reviews: Arc<dyn Reviews>) -> PortAuth {
        PortAuth {
            settings,
            reviews,
            tokens: TtlCache::default(),
            decisions: TtlCache::default(),
        }
    }

    /// Authenticates and authorizes `method` on `path`.
    pub async fn check(
        &self,
        peer: Option<&PeerCertificate>,
        headers: &HeaderMap,
        method: &http::Method,
        path: &str,
    ) -> Result<UserInfo, Refusal> {
        let user = self.authenticate(peer, headers).await?;
        let attrs = attributes::of(method, path, &self.settings.node_name);
        self.authorize(&user, &attrs).await?;
        Ok(user)
    }

    /// The client certificate's user, else the bearer token's; system:anonymous only for a
    /// request that carries neither, and only with --anonymous-auth.
    pub async fn authenticate(
        &self,
        peer: Option<&PeerCertificate>,
        headers: &HeaderMap,
    ) -> Result<UserInfo, Refusal> {
        let from_cert = peer.and_then(|p| self.settings.client_ca.as_ref()?.user(&p.0));
        if let Some(user) = from_cert {
            return Ok(authenticated(user));
        }
        match bearer_token(headers) {
            Some(token) => self.token_user(token).await.map(authenticated),
            None if peer.is_none() && self.settings.anonymous => Ok(anonymous()),
            None => Err(Refusal::Unauthorized),
        }
    }

    async fn token_user(&self, token: &str) -> Result<UserInfo, Refusal> {
        if token.is_empty() {
            return Err(Refusal::Unauthorized);
        }
        let now = Instant::now();
        let known = match self.tokens.get(&token.to_string(), now) {
            Some(known) => known,
            None => {
                let answer = self.reviews.token(token).await.map_err(|e| {
                    tracing::warn!(error = %e, "bearer token on port 10250 not checked");
                    Refusal::Unauthorized
                })?;
                let ttl = self.settings.ttls.token;
                self.tokens
                    .insert(token.to_string(), answer.clone(), ttl, now);
                answer
            }
        };
        known.ok_or(Refusal::Unauthorized)
    }

    /// Whether `user` may do `attrs`, as the API server answers (cached).
    pub async fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Result<(), Refusal> {
        let now = Instant::now();
        let key = (user.clone(), attrs.clone());
        let decision = match self.decisions.get(&key, now) {
            Some(d) => d,
            None => {
                let d = self.reviews.access(user, attrs).await.map_err(|e| {
                    tracing::warn!(error = %e, "access to port 10250 not reviewed");
                    Refusal::AuthorizationError(describe("Authorization error", user, attrs))
                })?;
                let ttl = match d.allowed {
                    true => self.settings.ttls.authorized,
                    false => self.settings.ttls.unauthorized,
                };
                self.decisions.insert(key, d.clone(), ttl, now);
                d
            }
        };
        if decision.allowed {
            return Ok(());
        }
        tracing::debug!(user = %user.name, verb = attrs.verb, subresource = attrs.subresource, reason = %decision.reason, "forbidden on port 10250");
        Err(Refusal::Forbidden(describe("Forbidden", user, attrs)))
    }
}

/// The kubelet's wording: "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)".
fn describe(what: &str, user: &UserInfo, attrs: &Attributes) -> String {
    format!(
        "{what} (user={}, verb={}, resource={}, subresource={})",
        user.name,
        attrs.verb,
        attributes::RESOURCE,
        attrs.subresource
    )
}

/// Every authenticated user is in system:authenticated, as the API server's users are.
fn authenticated(mut user: UserInfo) -> UserInfo {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".to_string());
    }
    user
}

fn anonymous() -> UserInfo {
    UserInfo {
        name: "system:anonymous".to_string(),
        groups: vec!["system:unauthenticated".to_string()],
        ..Default::default()
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case); Some("")
/// for a bearer header without a token, which then fails rather than counting as no header.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The middleware guarding every path but /healthz.
pub async fn require(State(auth): State<Arc<PortAuth>>, req: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let peer = req.extensions().get::<PeerCertificate>();
    match auth
        .check(peer, req.headers(), req.method(), req.uri().path())
        .await
    {
        Ok(_) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests;
