use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::HeaderValue;
use rcgen::ExtendedKeyUsagePurpose;
use tower::ServiceExt;

use super::review::ReviewError;
use super::x509::tests::TestCa;
use super::*;

/// The API server's side: tokens it knows, what it allows, and the reviews it was asked.
#[derive(Default)]
struct FakeApi {
    tokens: HashMap<String, UserInfo>,
    /// (user, subresource) pairs that are allowed.
    allowed: Vec<(String, &'static str)>,
    down: bool,
    token_reviews: Mutex<Vec<String>>,
    access_reviews: Mutex<Vec<(UserInfo, Attributes)>>,
}

#[async_trait::async_trait]
impl Reviews for FakeApi {
    async fn token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        self.token_reviews.lock().unwrap().push(token.to_string());
        if self.down {
            return Err(ReviewError::Api {
                review: "TokenReview",
                message: "connection refused".into(),
            });
        }
        Ok(self.tokens.get(token).cloned())
    }

    async fn access(&self, user: &UserInfo, attrs: &Attributes) -> Result<Decision, ReviewError> {
        self.access_reviews
            .lock()
            .unwrap()
            .push((user.clone(), attrs.clone()));
        if self.down {
            return Err(ReviewError::Api {
                review: "SubjectAccessReview",
                message: "connection refused".into(),
            });
        }
        let allowed = self
            .allowed
            .iter()
            .any(|(u, s)| *u == user.name && *s == attrs.subresource);
        Ok(Decision {
            allowed,
            reason: String::new(),
        })
    }
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

/// alice's token "t-alice" may read logs through nodes/proxy; bob's "t-bob" only metrics.
fn api() -> FakeApi {
    FakeApi {
        tokens: HashMap::from([
            (
                "t-alice".into(),
                user("alice", &["dev", "system:authenticated"]),
            ),
            ("t-bob".into(), user("bob", &["system:authenticated"])),
        ]),
        allowed: vec![
            ("alice".into(), "proxy"),
            ("bob".into(), "metrics"),
            ("kube-apiserver-kubelet-client".into(), "proxy"),
            ("system:anonymous".into(), "metrics"),
        ],
        ..Default::default()
    }
}

fn settings(client_ca: Option<ClientCa>, anonymous: bool) -> Settings {
    Settings {
        node_name: "n1".into(),
        client_ca,
        anonymous,
        ttls: Ttls::default(),
    }
}

/// The port's router shape: everything behind `require`, answering "ok".
fn app(auth: Arc<PortAuth>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(|| async { "ok" }))
        .route("/containerLogs/{ns}/{pod}/{c}", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(auth, require))
}

async fn status(
    app: &Router,
    path: &str,
    token: Option<&str>,
    peer: Option<&[u8]>,
) -> (StatusCode, String) {
    let mut req = http::Request::get(path).body(Body::empty()).unwrap();
    if let Some(t) = token {
        let value = HeaderValue::from_str(&format!("Bearer {t}")).unwrap();
        req.headers_mut().insert(header::AUTHORIZATION, value);
    }
    if let Some(der) = peer {
        req.extensions_mut()
            .insert(PeerCertificate(Arc::new(der.to_vec())));
    }
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .unwrap();
    (code, String::from_utf8_lossy(&body).to_string())
}

const LOGS: &str = "/containerLogs/default/web/app";

#[tokio::test]
async fn without_credentials_only_healthz_answers() {
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, false), fake.clone())));
    assert_eq!(status(&app, "/healthz", None, None).await.0, StatusCode::OK);
    let (code, body) = status(&app, LOGS, None, None).await;
    assert_eq!(
        (code, body.as_str()),
        (StatusCode::UNAUTHORIZED, "Unauthorized")
    );
    assert_eq!(
        status(&app, "/metrics", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Unknown paths are not told apart from known ones before authentication.
    assert_eq!(
        status(&app, "/nothing", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert!(fake.access_reviews.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_token_is_reviewed_then_its_user_authorized_on_the_nodes_subresource() {
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, false), fake.clone())));
    assert_eq!(
        status(&app, LOGS, Some("t-alice"), None).await.0,
        StatusCode::OK
    );
    let (code, body) = status(&app, LOGS, Some("t-bob"), None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)"
    );
    assert_eq!(
        status(&app, "/metrics", Some("t-bob"), None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, LOGS, Some("forged"), None).await.0,
        StatusCode::UNAUTHORIZED
    );
    let reviews = fake.access_reviews.lock().unwrap();
    let (alice, attrs) = &reviews[0];
    assert_eq!(alice, &user("alice", &["dev", "system:authenticated"]));
    assert_eq!(
        attrs,
        &Attributes {
            verb: "get",
            subresource: "proxy",
            name: "n1".into()
        }
    );
}

#[tokio::test]
async fn an_empty_or_other_scheme_authorization_header_is_no_token() {
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, true), fake.clone())));
    let mut req = http::Request::get(LOGS).body(Body::empty()).unwrap();
    req.headers_mut()
        .insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::UNAUTHORIZED,
        "an empty bearer token fails"
    );
    assert!(
        fake.token_reviews.lock().unwrap().is_empty(),
        "not sent for review"
    );
    let mut req = http::Request::get("/metrics").body(Body::empty()).unwrap();
    req.headers_mut().insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic YTpi"),
    );
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "anonymous, allowed /metrics");
}

#[tokio::test]
async fn anonymous_auth_makes_requests_without_credentials_system_anonymous() {
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, true), fake.clone())));
    assert_eq!(status(&app, "/metrics", None, None).await.0, StatusCode::OK);
    let (code, body) = status(&app, LOGS, None, None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(body.contains("user=system:anonymous"), "{body}");
    let first = fake.access_reviews.lock().unwrap()[0].0.clone();
    assert_eq!(first, user("system:anonymous", &["system:unauthenticated"]));
    // A token the API server does not know is still refused, not made anonymous.
    assert_eq!(
        status(&app, "/metrics", Some("forged"), None).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn client_certificates_of_the_client_ca_authenticate_others_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(tmp.path(), "cluster-ca");
    let other = TestCa::new(tmp.path(), "other-ca");
    let client_ca = ClientCa::load(&ca.path).unwrap();
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(
        settings(Some(client_ca), true),
        fake.clone(),
    )));
    let usage = ExtendedKeyUsagePurpose::ClientAuth;
    let (apiserver, _) = ca.client("kube-apiserver-kubelet-client", &[], usage.clone());
    assert_eq!(
        status(&app, LOGS, None, Some(&apiserver)).await.0,
        StatusCode::OK
    );
    let reviews = fake.access_reviews.lock().unwrap().clone();
    assert_eq!(
        reviews[0].0,
        user("kube-apiserver-kubelet-client", &["system:authenticated"])
    );
    let (foreign, _) = other.client("kube-apiserver-kubelet-client", &[], usage);
    // Even with anonymous access on, a certificate that fails is a 401, not anonymous.
    assert_eq!(
        status(&app, "/metrics", None, Some(&foreign)).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A token beside a foreign certificate still authenticates.
    assert_eq!(
        status(&app, LOGS, Some("t-alice"), Some(&foreign)).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn without_a_client_ca_certificates_authenticate_nobody() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(tmp.path(), "cluster-ca");
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, false), fake)));
    let (cert, _) = ca.client("alice", &[], ExtendedKeyUsagePurpose::ClientAuth);
    assert_eq!(
        status(&app, LOGS, None, Some(&cert)).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn an_api_server_that_cannot_answer_means_401_or_500() {
    let fake = Arc::new(FakeApi {
        down: true,
        ..api()
    });
    let tmp = tempfile::tempdir().unwrap();
    let ca = TestCa::new(tmp.path(), "cluster-ca");
    let client_ca = ClientCa::load(&ca.path).unwrap();
    let app = app(Arc::new(PortAuth::new(
        settings(Some(client_ca), false),
        fake.clone(),
    )));
    assert_eq!(
        status(&app, LOGS, Some("t-alice"), None).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (cert, _) = ca.client("alice", &[], ExtendedKeyUsagePurpose::ClientAuth);
    let (code, body) = status(&app, LOGS, None, Some(&cert)).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "Authorization error (user=alice, verb=get, resource=nodes, subresource=proxy)"
    );
    // Failures are not cached: asked again each time.
    status(&app, LOGS, Some("t-alice"), None).await;
    status(&app, LOGS, None, Some(&cert)).await;
    assert_eq!(fake.token_reviews.lock().unwrap().len(), 2);
    assert_eq!(fake.access_reviews.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn answers_are_cached_for_the_kubelets_ttls() {
    let fake = Arc::new(api());
    let app = app(Arc::new(PortAuth::new(settings(None, false), fake.clone())));
    let tokens = || fake.token_reviews.lock().unwrap().len();
    let accesses = || fake.access_reviews.lock().unwrap().len();
    // alice is allowed (kept 5 min), bob forbidden (kept 30 s); tokens kept 2 min.
    for _ in 0..3 {
        assert_eq!(
            status(&app, LOGS, Some("t-alice"), None).await.0,
            StatusCode::OK
        );
        assert_eq!(
            status(&app, LOGS, Some("t-bob"), None).await.0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            status(&app, LOGS, Some("forged"), None).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!((tokens(), accesses()), (3, 2));
    tokio::time::advance(Duration::from_secs(31)).await;
    status(&app, LOGS, Some("t-alice"), None).await;
    status(&app, LOGS, Some("t-bob"), None).await;
    assert_eq!(
        (tokens(), accesses()),
        (3, 3),
        "only bob's denial asked again"
    );
    tokio::time::advance(Duration::from_secs(90)).await;
    status(&app, LOGS, Some("t-alice"), None).await;
    assert_eq!(
        (tokens(), accesses()),
        (4, 3),
        "alice's token reviewed again after 2 min"
    );
    tokio::time::advance(Duration::from_secs(180)).await;
    status(&app, LOGS, Some("t-alice"), None).await;
    assert_eq!((tokens(), accesses()), (5, 4), "and her access after 5 min");
    // Another path with the same subresource and verb is the same question.
    status(
        &app,
        "/containerLogs/default/other/app",
        Some("t-alice"),
        None,
    )
    .await;
    assert_eq!(accesses(), 4);
}
