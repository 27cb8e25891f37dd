use super::*;
use crate::auth::authorize::forbidden_message;
use crate::auth::User;
use crate::http::parse;

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        uid: String::new(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn attrs<'a>(method: &str, route: &'a Option<Route>, path: &'a str, query: &str) -> Attributes<'a> {
    request_attributes(method, route, path, query)
}

#[test]
fn verbs_and_names_as_upstreams_request_info() {
    let p = "/api/v1/namespaces/default/secrets";
    let route = parse(p);
    let a = attrs(
        "GET",
        &route,
        p,
        "fieldSelector=metadata.name%3Dtls&watch=true",
    );
    assert_eq!(a.verb, "watch");
    assert_eq!(a.resource.as_ref().unwrap().name, "tls");
    let a = attrs(
        "GET",
        &route,
        p,
        "fieldSelector=metadata.name%3Dtls%2Ctype%3Dx",
    );
    assert_eq!((a.verb, a.resource.unwrap().name.as_ref()), ("list", ""));
    let a = attrs("DELETE", &route, p, "");
    assert_eq!(a.verb, "deletecollection");
    let ssr = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let a = attrs("POST", &None, ssr, "");
    assert_eq!(
        (a.verb, a.resource.unwrap().resource),
        ("create", "selfsubjectreviews")
    );
    let a = attrs("GET", &None, "/healthz", "");
    assert_eq!((a.verb, a.resource), ("get", None));
}

#[test]
fn forbidden_messages_as_upstream() {
    let u = user("system:bootstrap:abcdef", &[]);
    let p = "/api/v1/namespaces/default/pods";
    let route = parse(p);
    assert_eq!(
        forbidden_message(&u, &attrs("GET", &route, p, ""), ""),
        r#"pods is forbidden: User "system:bootstrap:abcdef" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    let csr = "/apis/certificates.k8s.io/v1/certificatesigningrequests/x/approval";
    let route = parse(csr);
    assert_eq!(
        forbidden_message(&u, &attrs("PUT", &route, csr, ""), ""),
        r#"certificatesigningrequests.certificates.k8s.io "x" is forbidden: User "system:bootstrap:abcdef" cannot update resource "certificatesigningrequests/approval" in API group "certificates.k8s.io" at the cluster scope"#
    );
    let s = "/api/v1/namespaces/default/secrets/s";
    let route = parse(s);
    assert_eq!(
        forbidden_message(
            &user("system:node:n1", &[]),
            &attrs("GET", &route, s, ""),
            "no relationship found between node 'n1' and this object"
        ),
        r#"secrets "s" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'n1' and this object"#
    );
    assert_eq!(
        forbidden_message(&u, &attrs("GET", &None, "/metrics", ""), ""),
        r#"forbidden: User "system:bootstrap:abcdef" cannot get path "/metrics""#
    );
}
