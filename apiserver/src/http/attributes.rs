//! A request's authorization attributes as upstream's RequestInfo reads them: the verb from
//! the method and the query, the resource from the route, the name a field selector picks.

use super::Route;
use crate::auth::attributes::{selector_value, Attributes, ResourceAttributes};
use std::borrow::Cow;

/// The verb of a request as upstream's RequestInfo names it (`watch`: the query asks for one).
pub fn attributes<'a>(
    method: &str,
    route: &'a Option<Route>,
    path: &'a str,
    watch: bool,
) -> Attributes<'a> {
    let query = if watch { "watch=true" } else { "" };
    request_attributes(method, route, path, query)
}

/// `attributes` with the name a list or watch selects by `metadata.name` from its query.
pub fn request_attributes<'a>(
    method: &str,
    route: &'a Option<Route>,
    path: &'a str,
    query: &str,
) -> Attributes<'a> {
    if path.trim_end_matches('/') == SELF_SUBJECT_REVIEWS {
        return Attributes {
            verb: if method == "POST" {
                "create"
            } else {
                "unknown"
            },
            resource: Some(ResourceAttributes {
                group: "authentication.k8s.io",
                resource: "selfsubjectreviews",
                subresource: "",
                namespace: "",
                name: Cow::Borrowed(""),
                field_selector: Cow::Borrowed(""),
            }),
            path,
        };
    }
    let Some(Route::Resource(rp)) = route else {
        let verb = match method {
            "GET" | "HEAD" => "get",
            "POST" => "post",
            "PUT" => "put",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "unknown",
        };
        return Attributes {
            verb,
            resource: None,
            path,
        };
    };
    let collection = rp.name.is_empty();
    let watch = rp.legacy_watch || is_watch(query);
    let verb = match (method, collection) {
        ("GET" | "HEAD", true) if watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => "unknown",
    };
    let selector = match (verb, collection) {
        ("list" | "watch", true) => field_selector(query).unwrap_or_default(),
        _ => String::new(),
    };
    let name = match selected_name(&selector) {
        Some(n) => Cow::Owned(n.to_string()),
        None => Cow::Borrowed(rp.name.as_str()),
    };
    Attributes {
        verb,
        resource: Some(ResourceAttributes {
            group: rp.res.group,
            resource: rp.res.plural,
            subresource: &rp.sub,
            namespace: &rp.namespace,
            name,
            field_selector: Cow::Owned(selector),
        }),
        path,
    }
}

/// Where any authenticated user asks who the server thinks they are (`kubectl auth whoami`).
pub const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

pub fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// The decoded `fieldSelector` of a query, if it has one.
fn field_selector(query: &str) -> Option<String> {
    if !query.contains("fieldSelector") {
        return None;
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == "fieldSelector")
        .map(|(_, v)| v)
}

/// The name a `metadata.name=x` selector picks.
fn selected_name(selector: &str) -> Option<&str> {
    selector_value(selector, "metadata.name")
}

#[cfg(test)]
mod tests;
