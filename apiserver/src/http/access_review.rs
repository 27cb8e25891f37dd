//! POST authorization.k8s.io/v1 reviews, answered by the authorizers and never stored:
//! SelfSubjectAccessReview (`kubectl auth can-i`), SubjectAccessReview (the agent asking for a
//! caller of its port), LocalSubjectAccessReview (the same, in one namespace) and
//! SelfSubjectRulesReview (`kubectl auth can-i --list`).

use super::route::ResourcePath;
use super::{json_value, App, Call};
use crate::auth::authorize::{Attributes, Decision, ResourceAttributes};
use crate::auth::User;
use crate::object::strings;
use crate::status::{ApiError, ApiResult};
use axum::response::Response;
use http::{Method, StatusCode};
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::borrow::Cow;

pub fn handle(app: &App, rp: &ResourcePath, call: &Call) -> ApiResult<Response> {
    let kind = rp.res.kind;
    if call.method() != Method::POST || !rp.name.is_empty() {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {}.{})",
            call.method(),
            rp.res.plural,
            rp.res.group
        )));
    }
    let body = call.object()?;
    (rp.res.decode)(&body).map_err(|c| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {}: {}",
            c.field, c.message
        ))
    })?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match kind {
        "SelfSubjectRulesReview" => rules_review(app, &call.user, &spec),
        "SelfSubjectAccessReview" => access_review(app, &call.user, &spec, None)?,
        _ => {
            let namespace = (kind == "LocalSubjectAccessReview").then_some(rp.namespace.as_str());
            access_review(app, &subject(kind, &spec)?, &spec, namespace)?
        }
    };
    let mut metadata = json!({ "creationTimestamp": null });
    if rp.res.namespaced {
        crate::object::set_path(&mut metadata, &["namespace"], json!(rp.namespace));
    }
    let review = json!({
        "kind": kind, "apiVersion": "authorization.k8s.io/v1",
        "metadata": metadata, "spec": spec, "status": status,
    });
    Ok(json_value(StatusCode::CREATED, &review))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn invalid(kind: &str, cause: Cause) -> ApiError {
    ApiError::invalid(kind, "authorization.k8s.io", "", &[cause])
}

/// The user a SubjectAccessReview asks about, as given (no groups added).
fn subject(kind: &str, spec: &Value) -> ApiResult<User> {
    let user = User {
        name: text(spec, "user").to_string(),
        uid: text(spec, "uid").to_string(),
        groups: strings(spec, "groups"),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        let msg = "at least one of user or group must be specified";
        return Err(invalid(kind, Cause::invalid("spec.user", &json!(""), msg)));
    }
    Ok(user)
}

/// Whether `user` may do what spec.resourceAttributes or spec.nonResourceAttributes say.
fn access_review(app: &App, user: &User, spec: &Value, local: Option<&str>) -> ApiResult<Value> {
    let kind = match local {
        Some(_) => "LocalSubjectAccessReview",
        None => "SubjectAccessReview",
    };
    let (res, non) = (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    );
    let (res, non) = (res.filter(|v| !v.is_null()), non.filter(|v| !v.is_null()));
    let a = match (res, non) {
        (Some(_), Some(n)) => {
            let msg = "cannot be specified in combination with resourceAttributes";
            return Err(invalid(
                kind,
                Cause::invalid("spec.nonResourceAttributes", n, msg),
            ));
        }
        (None, None) => {
            let msg =
                "exactly one of nonResourceAttributes or resourceAttributes must be specified";
            return Err(invalid(
                kind,
                Cause::required("spec.resourceAttributes", msg),
            ));
        }
        (None, Some(n)) if local.is_some() => {
            let msg = "disallowed on this kind of request";
            return Err(invalid(
                kind,
                Cause::invalid("spec.nonResourceAttributes", n, msg),
            ));
        }
        (None, Some(n)) => Attributes {
            verb: text(n, "verb"),
            resource: None,
            path: text(n, "path"),
        },
        (Some(r), None) => {
            let namespace = text(r, "namespace");
            if let Some(ns) = local.filter(|ns| *ns != namespace) {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {ns}"
                )));
            }
            Attributes {
                verb: text(r, "verb"),
                resource: Some(ResourceAttributes {
                    group: text(r, "group"),
                    resource: text(r, "resource"),
                    subresource: text(r, "subresource"),
                    namespace,
                    name: Cow::Borrowed(text(r, "name")),
                    field_selector: Cow::Borrowed(
                        r.pointer("/fieldSelector/rawSelector")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                    ),
                }),
                path: "",
            }
        }
    };
    let (allowed, reason) = match app.authz.decide(user, &a) {
        Decision::Allow(reason) => (true, reason),
        Decision::NoOpinion(reason) => (false, reason),
    };
    let mut status = json!({ "allowed": allowed });
    if !reason.is_empty() {
        crate::object::set_path(&mut status, &["reason"], json!(reason));
    }
    Ok(status)
}

/// The requester's rules in spec.namespace, resource and non-resource rules apart.
fn rules_review(app: &App, user: &User, spec: &Value) -> Value {
    let (rules, incomplete) = app.authz.rules(user, text(spec, "namespace"));
    let (non, res): (Vec<_>, Vec<_>) = rules.iter().partition(|r| !r.non_resource_urls.is_empty());
    let resource_rules: Vec<Value> = res.iter().map(|r| r.to_value()).collect();
    let non_resource_rules: Vec<Value> = non.iter().map(|r| r.to_value()).collect();
    json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": incomplete,
    })
}
