//! Errors as Kubernetes Status objects: what kubectl prints depends on kind, reason and details.

use crate::object::set_path;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};

/// A failed request as a Kubernetes Status: HTTP code, reason, message and details.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} ({reason}, {code})")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

fn details(kind: &str, name: &str, group: &str) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !group.is_empty() {
        set_path(&mut d, &["group"], json!(group));
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// An error about one named object, with the details kubectl reads: `pods "web" ...`,
    /// or `deployments.apps "web" ...` outside the core group.
    fn about_object(
        code: u16,
        reason: &'static str,
        (group, plural, name): (&str, &str, &str),
        message: impl FnOnce(&str) -> String,
    ) -> ApiError {
        let what = if group.is_empty() {
            format!("{plural} \"{name}\"")
        } else {
            format!("{plural}.{group} \"{name}\"")
        };
        ApiError {
            details: Some(details(plural, name, group)),
            ..ApiError::new(code, reason, message(&what))
        }
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let object = (group, plural, name);
        ApiError::about_object(404, "NotFound", object, |what| format!("{what} not found"))
    }

    pub fn no_route(path: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        let object = (group, plural, name);
        ApiError::about_object(409, "AlreadyExists", object, |what| {
            format!("{what} already exists")
        })
    }

    pub fn conflict(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::about_object(409, "Conflict", (group, plural, name), |what| {
            format!("Operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to the latest version and try again")
        })
    }

    /// 422 with causes; kubectl builds its message from details.kind, name and causes.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[Cause]) -> ApiError {
        let text: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let mut d = details(kind, name, group);
        set_path(
            &mut d,
            &["causes"],
            serde_json::to_value(causes).unwrap_or(Value::Null),
        );
        ApiError {
            details: Some(d),
            ..ApiError::new(
                422,
                "Invalid",
                format!("{kind} \"{name}\" is invalid: {}", text.join(", ")),
            )
        }
    }

    /// 403 with the authorizer's message; details name the resource when there is one.
    pub fn forbidden(message: String, resource: Option<(&str, &str, &str)>) -> ApiError {
        ApiError {
            details: resource.map(|(group, plural, name)| details(plural, name, group)),
            ..ApiError::new(403, "Forbidden", message)
        }
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media(ct: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/strategic-merge-patch+json, application/merge-patch+json, application/json-patch+json, application/apply-patch+yaml (got {ct:?})"),
        )
    }

    pub fn gone(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        match &self.details {
            Some(d) => set_path(&mut s, &["details"], d.clone()),
            // Upstream's NotFound always has details (empty for a path it does not serve), and
            // kubectl debug reads details.name of a NotFound without checking for them.
            None if self.reason == "NotFound" => set_path(&mut s, &["details"], json!({})),
            None => {}
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> ApiError {
        ApiError::internal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubectl reads `ErrStatus.Details.Name` of a NotFound without a nil check.
    #[test]
    fn every_not_found_has_details() {
        let unserved = ApiError::no_route("/api/v1/namespaces/x/pods/p/nope").to_status();
        assert_eq!(unserved["details"], json!({}));
        assert_eq!(unserved["reason"], "NotFound");
        let relayed = ApiError::new(404, "NotFound", "container not found").to_status();
        assert_eq!(relayed["details"], json!({}));
        let object = ApiError::not_found("", "pods", "web").to_status();
        assert_eq!(object["details"], json!({"name": "web", "kind": "pods"}));
        assert!(ApiError::bad_request("x")
            .to_status()
            .get("details")
            .is_none());
    }
}
