//! POST authentication.k8s.io/v1 TokenReview: whether a bearer token authenticates, and as
//! whom (how the agent checks the tokens sent to its port, as the kubelet does).

use super::{json_value, App, Call};
use crate::auth;
use crate::object::set_path;
use crate::status::{ApiError, ApiResult};
use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::{json, Value};

pub fn token_review(app: &App, call: &Call) -> ApiResult<Response> {
    if call.method() != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} tokenreviews.authentication.k8s.io)",
            call.method()
        )));
    }
    let body = call.object()?;
    (keelson_apiserver_registry::schema::TOKEN_REVIEW)(&body).map_err(|c| {
        ApiError::bad_request(format!(
            "TokenReview in version \"v1\" cannot be handled as a TokenReview: {}: {}",
            c.field, c.message
        ))
    })?;
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    let asked = crate::object::strings(&spec, "audiences");
    let keys = &app.service_accounts;
    let audiences = match asked.is_empty() {
        true => keys.api_audiences.clone(),
        false => asked.clone(),
    };
    let lookup = |plural: &str, ns: &str, name: &str| app.api.stored(plural, ns, name);
    let status = match auth::review_token(&app.tokens, keys, &lookup, token, &audiences) {
        Ok(r) => {
            let user = auth::with_authenticated(r.user);
            let mut info = json!({ "username": user.name, "groups": user.groups });
            if !user.uid.is_empty() {
                set_path(&mut info, &["uid"], json!(user.uid));
            }
            if r.extra.as_object().is_some_and(|m| !m.is_empty()) {
                set_path(&mut info, &["extra"], r.extra);
            }
            json!({ "authenticated": true, "user": info, "audiences": r.audiences })
        }
        Err(e) => {
            tracing::debug!(error = %e, "TokenReview: token not authenticated");
            json!({ "user": {}, "error": "invalid bearer token" })
        }
    };
    let review = json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": { "creationTimestamp": null },
        "spec": spec,
        "status": status,
    });
    Ok(json_value(StatusCode::CREATED, &review))
}
