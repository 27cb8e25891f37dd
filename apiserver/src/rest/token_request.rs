//! POST serviceaccounts/{name}/token (authentication.k8s.io/v1 TokenRequest): a signed token
//! for the service account, for the asked audiences and lifetime, optionally bound to a Pod
//! (then it stops authenticating once that pod is gone).

use super::{Api, Target};
use crate::auth::serviceaccount::{Claims, Private, Ref, TokenKeys};
use crate::auth::User;
use crate::object::{self, meta_str};
use crate::status::{ApiError, ApiResult};
use keelson_apimachinery::well_known::NODES_GROUP;
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};

/// expirationSeconds when the request gives none, as upstream.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Upstream's cap on any token's lifetime.
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// Issues a token for the service account `t` as the TokenRequest `body` asks; returns the
/// TokenRequest with its status.
pub fn request_token(
    api: &Api,
    keys: &TokenKeys,
    t: &Target,
    body: &Value,
    requester: &User,
) -> ApiResult<Value> {
    (keelson_apiserver_registry::schema::TOKEN_REQUEST)(body).map_err(|c| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {}: {}",
            c.field, c.message
        ))
    })?;
    let sa = api.get_entry(t)?;
    if object::is_deleting(&sa.obj) {
        return Err(t.not_found());
    }
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let seconds = expiration(&spec, keys.min_expiration_seconds, &t.name)?;
    let mut audiences = crate::object::strings(&spec, "audiences");
    if audiences.is_empty() {
        audiences = keys.api_audiences.clone();
    }
    let bound = spec.get("boundObjectRef").filter(|b| !b.is_null());
    let (pod, node) = match bound {
        Some(b) => bound_pod(api, &t.namespace, &t.name, b)?,
        None => (None, None),
    };
    node_restriction(
        requester,
        &t.name,
        bound.is_some(),
        pod.as_ref(),
        node.as_ref(),
    )?;
    let now = chrono::Utc::now().timestamp();
    let claims = Claims {
        aud: audiences.clone(),
        exp: now + seconds,
        iat: now,
        iss: keys.issuer.clone(),
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes: Private {
            namespace: t.namespace.clone(),
            serviceaccount: Ref {
                name: t.name.clone(),
                uid: meta_str(&sa.obj, "uid").to_string(),
            },
            pod: pod.clone(),
            node: node.clone(),
        },
        nbf: now,
        sub: format!("system:serviceaccount:{}:{}", t.namespace, t.name),
    };
    let token = keys.sign(&claims).map_err(ApiError::internal)?;
    let mut spec = json!({ "audiences": audiences, "expirationSeconds": seconds });
    if let Some(b) = bound {
        object::set_path(&mut spec, &["boundObjectRef"], b.clone());
    }
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": { "name": t.name, "namespace": t.namespace, "creationTimestamp": null },
        "spec": spec,
        "status": { "token": token, "expirationTimestamp": object::rfc3339_in(seconds) },
    }))
}

/// spec.expirationSeconds, checked against upstream's bounds.
fn expiration(spec: &Value, min: i64, name: &str) -> ApiResult<i64> {
    let Some(v) = spec.get("expirationSeconds").filter(|v| !v.is_null()) else {
        return Ok(DEFAULT_EXPIRATION_SECONDS);
    };
    let seconds = v.as_i64().unwrap_or(0);
    let detail = if seconds < min {
        "may not specify a duration less than 10 minutes"
    } else if seconds > MAX_EXPIRATION_SECONDS {
        "may not specify a duration larger than 2^32 seconds"
    } else {
        return Ok(seconds);
    };
    let cause = Cause::invalid("spec.expirationSeconds", v, detail);
    Err(ApiError::invalid(
        "TokenRequest",
        "authentication.k8s.io",
        name,
        &[cause],
    ))
}

/// The Pod a token is bound to (and the node it runs on), checked as upstream does: it must
/// exist with the given uid and run as this service account.
fn bound_pod(
    api: &Api,
    ns: &str,
    sa: &str,
    bound: &Value,
) -> ApiResult<(Option<Ref>, Option<Ref>)> {
    let field = |k: &str| bound.get(k).and_then(Value::as_str).unwrap_or("");
    let (kind, name, uid) = (field("kind"), field("name"), field("uid"));
    if kind != "Pod" {
        return Err(ApiError::bad_request(format!(
            "cannot bind token to object of type {kind:?}: only Pod is supported"
        )));
    }
    let pod = api
        .stored("pods", ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let stored_uid = meta_str(&pod, "uid");
    if !uid.is_empty() && uid != stored_uid {
        let mut e = ApiError::conflict("", "Pod", name);
        e.message = format!(
            "Operation cannot be fulfilled on Pod \"{name}\": the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        );
        return Err(e);
    }
    let runs_as = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    if runs_as != sa {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {sa:?} to pod running with different serviceaccount name."
        )));
    }
    let node_name = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = (!node_name.is_empty()).then(|| Ref {
        name: node_name.to_string(),
        uid: api
            .stored("nodes", "", node_name)
            .map(|n| meta_str(&n, "uid").to_string())
            .unwrap_or_default(),
    });
    let pod = Ref {
        name: name.to_string(),
        uid: stored_uid.to_string(),
    };
    Ok((Some(pod), node))
}

/// Upstream's NodeRestriction for TokenRequests: a node may only ask for tokens bound to a
/// pod that runs on it.
fn node_restriction(
    requester: &User,
    sa: &str,
    bound: bool,
    pod: Option<&Ref>,
    node: Option<&Ref>,
) -> ApiResult<()> {
    let Some(me) = requester.name.strip_prefix("system:node:") else {
        return Ok(());
    };
    if !requester.groups.iter().any(|g| g == NODES_GROUP) {
        return Ok(());
    }
    let why = match (bound, pod, node) {
        (false, _, _) | (true, None, _) => "node requested token not bound to a pod",
        (true, Some(_), Some(n)) if n.name == me => return Ok(()),
        _ => "node requested token bound to a pod scheduled on a different node",
    };
    Err(ApiError::forbidden(
        format!("serviceaccounts {sa:?} is forbidden: {why}"),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiration_defaults_and_bounds_as_upstream() {
        assert_eq!(expiration(&json!({}), 600, "sa").unwrap(), 3600);
        assert_eq!(
            expiration(&json!({"expirationSeconds": 600}), 600, "sa").unwrap(),
            600
        );
        let e = expiration(&json!({"expirationSeconds": 60}), 600, "sa").unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains(
                "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
            ),
            "{}",
            e.message
        );
        let huge = json!({"expirationSeconds": (1_i64 << 32) + 1});
        assert!(expiration(&huge, 600, "sa").is_err());
    }

    #[test]
    fn nodes_get_tokens_only_for_their_own_pods() {
        let node = |name: &str| User {
            name: format!("system:node:{name}"),
            uid: String::new(),
            groups: vec![NODES_GROUP.into()],
        };
        let pod = Ref {
            name: "p".into(),
            uid: "u".into(),
        };
        let on = |n: &str| Ref {
            name: n.into(),
            uid: String::new(),
        };
        let n1 = node("n1");
        assert!(node_restriction(&n1, "sa", true, Some(&pod), Some(&on("n1"))).is_ok());
        let e = node_restriction(&n1, "sa", true, Some(&pod), Some(&on("n2"))).unwrap_err();
        assert_eq!(
            e.message,
            "serviceaccounts \"sa\" is forbidden: node requested token bound to a pod scheduled on a different node"
        );
        let e = node_restriction(&n1, "sa", false, None, None).unwrap_err();
        assert!(e
            .message
            .ends_with("node requested token not bound to a pod"));
        let admin = User {
            name: "admin".into(),
            uid: String::new(),
            groups: vec![],
        };
        assert!(node_restriction(&admin, "sa", false, None, None).is_ok());
    }
}
