//! What an identity may do before RBAC exists: everyone authenticated may do everything,
//! except bootstrap token users (group system:bootstrappers), who may only create and read
//! CertificateSigningRequests and read discovery. Refusals are 403 with upstream's message.

use super::User;
use crate::http::Route;
use keelson_apimachinery::well_known::BOOTSTRAPPERS_GROUP;

/// What a request asks to do, in RBAC's terms.
#[derive(Debug, PartialEq)]
pub struct Attributes<'a> {
    pub verb: &'static str,
    /// None for a non-resource path such as /version.
    pub resource: Option<ResourceAttributes<'a>>,
    pub path: &'a str,
}

#[derive(Debug, PartialEq)]
pub struct ResourceAttributes<'a> {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// The verb of a request as upstream's RequestInfo names it.
pub fn attributes<'a>(
    method: &str,
    route: &'a Option<Route>,
    path: &'a str,
    watch: bool,
) -> Attributes<'a> {
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
    let verb = match (method, collection) {
        ("GET" | "HEAD", true) if watch || rp.legacy_watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => "unknown",
    };
    Attributes {
        verb,
        resource: Some(ResourceAttributes {
            group: rp.res.group,
            resource: rp.res.plural,
            subresource: &rp.sub,
            namespace: &rp.namespace,
            name: &rp.name,
        }),
        path,
    }
}

/// Ok, or upstream's Forbidden message for `user`.
pub fn authorize(user: &User, a: &Attributes) -> Result<(), String> {
    if !user.groups.iter().any(|g| g == BOOTSTRAPPERS_GROUP) || bootstrapper_may(a) {
        return Ok(());
    }
    Err(forbidden_message(user, a))
}

fn bootstrapper_may(a: &Attributes) -> bool {
    match &a.resource {
        Some(r) => {
            r.group == "certificates.k8s.io"
                && r.resource == "certificatesigningrequests"
                && r.subresource.is_empty()
                && matches!(a.verb, "create" | "get" | "list" | "watch")
        }
        None => {
            (a.verb == "get" && is_discovery(a.path))
                || (a.verb == "post" && a.path.trim_end_matches('/') == SELF_SUBJECT_REVIEWS)
        }
    }
}

/// Where any authenticated user asks who the server thinks they are (`kubectl auth whoami`).
pub const SELF_SUBJECT_REVIEWS: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// What upstream's system:discovery role allows: /api, /apis and below them the discovery
/// documents (resource paths were routed above), /version and the OpenAPI documents (kubectl
/// fetches them before every create).
fn is_discovery(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    ["/api", "/apis", "/version", "/openapi"].contains(&p)
        || ["/api/", "/apis/", "/openapi/"]
            .iter()
            .any(|prefix| p.starts_with(prefix))
}

/// `pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace
/// "default"`, as upstream's authorization filter words it.
fn forbidden_message(user: &User, a: &Attributes) -> String {
    let name = &user.name;
    let Some(r) = &a.resource else {
        return format!(
            "forbidden: User {name:?} cannot {} path {:?}",
            a.verb, a.path
        );
    };
    let mut resource = r.resource.to_string();
    if !r.subresource.is_empty() {
        resource = format!("{resource}/{}", r.subresource);
    }
    let why = if r.namespace.is_empty() {
        format!(
            "User {name:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            a.verb, r.group
        )
    } else {
        format!(
            "User {name:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            a.verb, r.group, r.namespace
        )
    };
    let qualified = if r.group.is_empty() {
        r.resource.to_string()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    if r.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", r.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse;

    fn bootstrapper() -> User {
        User {
            name: "system:bootstrap:abcdef".into(),
            uid: String::new(),
            groups: vec!["system:bootstrappers".into(), "system:authenticated".into()],
        }
    }

    fn check(method: &str, path: &str) -> Result<(), String> {
        let route = parse(path);
        authorize(&bootstrapper(), &attributes(method, &route, path, false))
    }

    #[test]
    fn bootstrappers_may_create_and_read_csrs_and_discovery() {
        let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
        assert_eq!(check("POST", csrs), Ok(()));
        assert_eq!(check("GET", csrs), Ok(()));
        assert_eq!(check("GET", &format!("{csrs}/node-csr-1")), Ok(()));
        for p in [
            "/api",
            "/apis",
            "/api/v1",
            "/apis/certificates.k8s.io/v1",
            "/version",
            "/openapi/v2",
        ] {
            assert_eq!(check("GET", p), Ok(()), "{p}");
        }
    }

    #[test]
    fn everything_else_is_forbidden_with_upstreams_message() {
        let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
        assert_eq!(
            check("GET", "/api/v1/namespaces/default/pods"),
            Err(r#"pods is forbidden: User "system:bootstrap:abcdef" cannot list resource "pods" in API group "" in the namespace "default""#.into())
        );
        assert_eq!(
            check("PUT", &format!("{csrs}/x/approval")),
            Err(r#"certificatesigningrequests.certificates.k8s.io "x" is forbidden: User "system:bootstrap:abcdef" cannot update resource "certificatesigningrequests/approval" in API group "certificates.k8s.io" at the cluster scope"#.into())
        );
        assert!(check("DELETE", &format!("{csrs}/x")).is_err());
        assert_eq!(check("POST", SELF_SUBJECT_REVIEWS), Ok(()));
        assert_eq!(
            check("GET", "/metrics-not-public"),
            Err(r#"forbidden: User "system:bootstrap:abcdef" cannot get path "/metrics-not-public""#.into())
        );
        let admin = User {
            name: "a".into(),
            uid: String::new(),
            groups: vec!["system:masters".into()],
        };
        let route = parse("/api/v1/pods");
        assert_eq!(
            authorize(&admin, &attributes("GET", &route, "/api/v1/pods", false)),
            Ok(())
        );
    }
}
