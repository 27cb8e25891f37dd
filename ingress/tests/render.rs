//! Pure tests: cluster objects in, model and nginx.conf text out. No root, no processes, except
//! the last test, which asks the real `nginx -t` whether the rendered text is valid.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use keelson_ingress::model::{self, Inputs, Model, Target};
use keelson_ingress::render::{render, RenderOptions};
use keelson_ingress::retry;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

const OURS: &str = "keelson.dev/ingress-nginx";

fn obj<T: DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).expect("test object"))
}

fn class(
    name: &str,
    controller: &str,
    default: bool,
) -> Arc<k8s_openapi::api::networking::v1::IngressClass> {
    let annotations = if default {
        json!({model::DEFAULT_CLASS_ANNOTATION: "true"})
    } else {
        json!({})
    };
    obj(
        json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"controller": controller}}),
    )
}

fn ingress(
    name: &str,
    class: Option<&str>,
    spec: Value,
) -> Arc<k8s_openapi::api::networking::v1::Ingress> {
    let mut spec = spec;
    if let Some(c) = class {
        spec["ingressClassName"] = json!(c);
    }
    obj(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
}

/// An Ingress of class keelson with one rule: `host` and its `paths`.
fn one_host(
    name: &str,
    host: &str,
    paths: Value,
) -> Arc<k8s_openapi::api::networking::v1::Ingress> {
    ingress(
        name,
        Some("keelson"),
        json!({"rules": [rule(Some(host), paths)]}),
    )
}

fn rule(host: Option<&str>, paths: Value) -> Value {
    let mut r = json!({"http": {"paths": paths}});
    if let Some(h) = host {
        r["host"] = json!(h);
    }
    r
}

fn path(p: &str, kind: &str, svc: &str, port: Value) -> Value {
    json!({"path": p, "pathType": kind, "backend": {"service": {"name": svc, "port": port}}})
}

fn service(name: &str, ports: Value) -> Arc<k8s_openapi::api::core::v1::Service> {
    obj(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"ports": ports}}))
}

/// One slice for `svc`: `(address, ready)` endpoints on one named port.
fn slice(
    name: &str,
    svc: &str,
    port_name: Option<&str>,
    port: i32,
    eps: &[(&str, Option<bool>)],
) -> Arc<k8s_openapi::api::discovery::v1::EndpointSlice> {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(a, ready)| match ready {
            Some(r) => json!({"addresses": [a], "conditions": {"ready": r}}),
            None => json!({"addresses": [a]}),
        })
        .collect();
    let mut p = json!({"port": port, "protocol": "TCP"});
    if let Some(n) = port_name {
        p["name"] = json!(n);
    }
    obj(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {model::SERVICE_NAME_LABEL: svc}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": [p]
    }))
}

fn opts() -> RenderOptions {
    RenderOptions {
        bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        http_port: 8080,
        https_port: 8443,
        conf_dir: "/tmp/keelson-ingress-render".into(),
    }
}

/// A cluster with class `keelson` (ours), Service web (port http 80 -> pods on 8080, two ready
/// pods and one not ready) and Service api (unnamed port 8000, one pod on 9000).
fn cluster(ingresses: Vec<Arc<k8s_openapi::api::networking::v1::Ingress>>) -> Inputs {
    Inputs {
        secrets: vec![],
        ingresses,
        classes: vec![
            class("keelson", OURS, false),
            class("other", "example.com/other", false),
        ],
        services: vec![
            service(
                "web",
                json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9100}]),
            ),
            service("api", json!([{"port": 8000}])),
            service("empty", json!([{"name": "http", "port": 80}])),
        ],
        slices: vec![
            slice(
                "web-a",
                "web",
                Some("http"),
                8080,
                &[
                    ("10.0.0.2", Some(true)),
                    ("10.0.0.1", None),
                    ("10.0.0.9", Some(false)),
                ],
            ),
            slice(
                "web-m",
                "web",
                Some("metrics"),
                9100,
                &[("10.0.0.1", Some(true))],
            ),
            slice("api-a", "api", None, 9000, &[("10.0.1.1", Some(true))]),
            slice(
                "empty-a",
                "empty",
                Some("http"),
                80,
                &[("10.0.2.1", Some(false))],
            ),
        ],
    }
}

fn web_ingress() -> Arc<k8s_openapi::api::networking::v1::Ingress> {
    one_host(
        "web",
        "web.example.test",
        json!([
            path("/", "Prefix", "web", json!({"name": "http"})),
            path("/api", "Prefix", "api", json!({"number": 8000})),
        ]),
    )
}

/// The model of `cluster` with these Ingresses.
fn build(ingresses: Vec<Arc<k8s_openapi::api::networking::v1::Ingress>>) -> Model {
    model::build(&cluster(ingresses), OURS)
}

/// Fails with the whole rendered config unless it holds `want`.
fn assert_contains(text: &str, want: &str) {
    assert!(text.contains(want), "{text}");
}

/// The endpoints ("ip:port") of the upstream `name`.
fn upstream_endpoints(m: &Model, name: &str) -> Vec<String> {
    let upstream = m.upstreams.iter().find(|u| u.name == name);
    let upstream = upstream.unwrap_or_else(|| panic!("no upstream {name}"));
    upstream.endpoints.iter().map(|e| e.to_string()).collect()
}

fn server<'m>(m: &'m Model, host: Option<&str>) -> &'m model::Server {
    m.servers
        .iter()
        .find(|s| s.host.as_deref() == host)
        .expect("server")
}

#[test]
fn class_selection_by_name_and_default_class() {
    let classes = cluster(vec![]).classes;
    let spec = json!({"rules": [rule(Some("a.test"), json!([path("/", "Prefix", "web", json!({"number": 80}))]))]});
    assert!(model::is_handled(
        &ingress("a", Some("keelson"), spec.clone()),
        &classes,
        OURS
    ));
    assert!(!model::is_handled(
        &ingress("a", Some("other"), spec.clone()),
        &classes,
        OURS
    ));
    assert!(!model::is_handled(
        &ingress("a", Some("missing"), spec.clone()),
        &classes,
        OURS
    ));
    // No class: only when our class is the default one.
    assert!(!model::is_handled(
        &ingress("a", None, spec.clone()),
        &classes,
        OURS
    ));
    let with_default = vec![class("keelson", OURS, true)];
    assert!(model::is_handled(
        &ingress("a", None, spec.clone()),
        &with_default,
        OURS
    ));
    // Someone else's default class does not make class-less Ingresses ours.
    let others_default = vec![
        class("keelson", OURS, false),
        class("x", "example.com/other", true),
    ];
    assert!(!model::is_handled(
        &ingress("a", None, spec),
        &others_default,
        OURS
    ));
}

#[test]
fn other_controllers_ingresses_are_not_rendered() {
    let other = ingress(
        "other",
        Some("other"),
        json!({"rules": [rule(Some("other.test"), json!([path("/", "Prefix", "web", json!({"name": "http"}))]))]}),
    );
    let m = build(vec![web_ingress(), other]);
    assert_eq!(m.handled, vec![("default".to_string(), "web".to_string())]);
    assert!(m
        .servers
        .iter()
        .all(|s| s.host.as_deref() != Some("other.test")));
}

#[test]
fn named_port_resolves_to_ready_pod_addresses_of_that_port() {
    let m = build(vec![web_ingress()]);
    let eps = upstream_endpoints(&m, "default_web_http");
    // Sorted; not-ready 10.0.0.9 left out; the metrics port's slice not mixed in.
    assert_eq!(eps, ["10.0.0.1:8080", "10.0.0.2:8080"]);
    let eps = upstream_endpoints(&m, "default_api_8000");
    assert_eq!(eps, ["10.0.1.1:9000"]);
}

#[test]
fn backend_without_ready_endpoints_answers_503() {
    let ing = one_host(
        "e",
        "e.test",
        json!([
            path("/", "Prefix", "empty", json!({"name": "http"})),
            path("/gone", "Prefix", "no-such-service", json!({"number": 80})),
            path("/badport", "Prefix", "web", json!({"number": 81})),
        ]),
    );
    let m = build(vec![ing]);
    let s = server(&m, Some("e.test"));
    assert!(s.locations.iter().all(|l| l.target == Target::Unavailable));
    assert!(m.upstreams.is_empty());
    let text = render(&m, &opts());
    assert_contains(&text, "location / {\n            return 503;");
}

#[test]
fn prefix_is_element_wise_and_exact_beats_prefix() {
    let ing = one_host(
        "p",
        "p.test",
        json!([
            path("/foo/", "Prefix", "web", json!({"name": "http"})),
            path("/foo", "Exact", "api", json!({"number": 8000})),
            path(
                "/bar",
                "ImplementationSpecific",
                "api",
                json!({"number": 8000})
            ),
        ]),
    );
    let text = render(&build(vec![ing]), &opts());
    // /foo/ and /foo/... by prefix, /foo itself by the Exact rule (once), never /foobar.
    assert_contains(
        &text,
        "location /foo/ {\n            proxy_pass http://default_web_http;",
    );
    assert_contains(
        &text,
        "location = /foo {\n            proxy_pass http://default_api_8000;",
    );
    assert_eq!(text.matches("location = /foo {").count(), 1, "{text}");
    assert!(
        !text.contains("location /foo {"),
        "a bare prefix would match /foobar:\n{text}"
    );
    // ImplementationSpecific is Prefix.
    assert!(
        text.contains("location = /bar {") && text.contains("location /bar/ {"),
        "{text}"
    );
    // No root rule and no default backend: 404 for the rest.
    assert_contains(&text, "location / {\n            return 404;");
}

#[test]
fn rules_without_host_and_default_backend_go_to_the_default_server() {
    let ing = ingress(
        "d",
        Some("keelson"),
        json!({
            "defaultBackend": {"service": {"name": "api", "port": {"number": 8000}}},
            "rules": [rule(None, json!([path("/web", "Prefix", "web", json!({"name": "http"}))])), rule(Some("h.test"), json!([path("/x", "Exact", "web", json!({"name": "http"}))]))]
        }),
    );
    let m = build(vec![ing]);
    assert_eq!(m.servers[0].host, None, "default server first");
    let d = server(&m, None);
    assert_eq!(d.locations.len(), 1);
    assert_eq!(d.fallback, Target::Upstream("default_api_8000".into()));
    assert_eq!(
        server(&m, Some("h.test")).fallback,
        Target::Upstream("default_api_8000".into())
    );
    let text = render(&m, &opts());
    assert_contains(
        &text,
        "listen 127.0.0.1:8080 default_server;\n        server_name _;",
    );
}

#[test]
fn output_is_deterministic_whatever_the_input_order() {
    let a = cluster(vec![
        web_ingress(),
        one_host(
            "z",
            "a.test",
            json!([path("/", "Prefix", "api", json!({"number": 8000}))]),
        ),
    ]);
    let mut b = cluster(vec![]);
    b.ingresses = a.ingresses.iter().rev().cloned().collect();
    b.slices.reverse();
    b.services.reverse();
    b.classes.reverse();
    let ta = render(&model::build(&a, OURS), &opts());
    let tb = render(&model::build(&b, OURS), &opts());
    assert_eq!(ta, tb);
    assert_eq!(ta, render(&model::build(&a, OURS), &opts()));
    assert!(
        ta.find("server_name a.test").unwrap() < ta.find("server_name web.example.test").unwrap()
    );
}

#[test]
fn forwarding_headers_are_passed() {
    let text = render(&build(vec![web_ingress()]), &opts());
    for h in [
        "proxy_set_header Host $host;",
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "proxy_set_header X-Forwarded-Proto $scheme;",
        "proxy_set_header X-Real-IP $remote_addr;",
    ] {
        assert!(text.contains(h), "missing {h}:\n{text}");
    }
}

#[test]
fn unsafe_annotation_values_never_reach_the_config() {
    let mut ing = (*web_ingress()).clone();
    ing.metadata.annotations = Some(
        [(
            model::BODY_SIZE_ANNOTATION.to_string(),
            "1m; include /etc/passwd".to_string(),
        )]
        .into(),
    );
    let m = build(vec![Arc::new(ing.clone())]);
    let text = render(&m, &opts());
    assert!(
        !text.contains("passwd") && !text.contains("client_max_body_size"),
        "{text}"
    );
    // Left out whole, as ingress-nginx's annotation validation does: serving it without the
    // limit would drop what its owner asked for.
    assert!(!text.contains("web.example.test"), "{text}");
    assert!(m.handled.is_empty(), "{:?}", m.handled);
    assert_eq!(m.rejected.len(), 1, "{:?}", m.rejected);
    let r = &m.rejected[0];
    assert_eq!(r.ingress, ("default".to_string(), "web".to_string()));
    assert_eq!(r.reason, "BadConfig");
    assert!(
        r.message
            .starts_with("nginx.ingress.kubernetes.io/proxy-body-size \"1m; include"),
        "{}",
        r.message
    );
    for good in ["8m", "0", "512", "1G", "64k"] {
        ing.metadata.annotations =
            Some([(model::BODY_SIZE_ANNOTATION.to_string(), good.to_string())].into());
        let m = build(vec![Arc::new(ing.clone())]);
        assert!(m.rejected.is_empty(), "{good}: {:?}", m.rejected);
        let text = render(&m, &opts());
        assert_contains(&text, &format!("client_max_body_size {good};"));
    }
    for bad in ["12parsecs", "1.5m", "m", "", "1mb", "-1"] {
        ing.metadata.annotations =
            Some([(model::BODY_SIZE_ANNOTATION.to_string(), bad.to_string())].into());
        let m = build(vec![Arc::new(ing.clone())]);
        assert_eq!(m.rejected.len(), 1, "{bad:?}");
    }
}

/// A slice of web's `http` port with endpoints given their conditions whole.
fn slice_with_conditions(
    name: &str,
    eps: &[(&str, Value)],
) -> Arc<k8s_openapi::api::discovery::v1::EndpointSlice> {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(a, c)| json!({"addresses": [a], "conditions": c}))
        .collect();
    obj(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {model::SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
}

#[test]
fn terminating_endpoints_are_left_out_and_each_address_used_once() {
    let mut inputs = cluster(vec![web_ingress()]);
    inputs.slices.push(slice_with_conditions(
        "web-b",
        &[
            // Also in web-a: one server line, not two (twice the share of requests).
            ("10.0.0.2", json!({"ready": true})),
            (
                "10.0.0.3",
                json!({"ready": true, "serving": true, "terminating": false}),
            ),
            // Going away while still answering: the endpointslice controller's words for a
            // deleted pod, and the same with `ready` left unset or true.
            (
                "10.0.0.4",
                json!({"ready": false, "serving": true, "terminating": true}),
            ),
            ("10.0.0.5", json!({"serving": true, "terminating": true})),
            ("10.0.0.6", json!({"ready": true, "terminating": true})),
            ("10.0.0.7", json!({})),
        ],
    ));
    let m = model::build(&inputs, OURS);
    let eps = upstream_endpoints(&m, "default_web_http");
    assert_eq!(
        eps,
        [
            "10.0.0.1:8080",
            "10.0.0.2:8080",
            "10.0.0.3:8080",
            "10.0.0.7:8080"
        ]
    );
    let text = render(&m, &opts());
    assert_eq!(text.matches("server 10.0.0.2:8080;").count(), 1, "{text}");
    for gone in ["10.0.0.4", "10.0.0.5", "10.0.0.6"] {
        assert!(!text.contains(gone), "{gone} is terminating:\n{text}");
    }

    // The last endpoint terminating leaves no upstream: 503, not a request to a dying pod.
    let mut inputs = cluster(vec![web_ingress()]);
    inputs.slices.retain(|s| {
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(model::SERVICE_NAME_LABEL))
            .map(String::as_str)
            != Some("web")
    });
    let draining = json!({"ready": false, "serving": true, "terminating": true});
    inputs
        .slices
        .push(slice_with_conditions("web-c", &[("10.0.0.4", draining)]));
    let m = model::build(&inputs, OURS);
    let s = server(&m, Some("web.example.test"));
    let root = s.locations.iter().find(|l| l.path == "/").expect("/");
    assert_eq!(root.target, Target::Unavailable);
}

fn retry_annotations() -> std::collections::BTreeMap<String, String> {
    [
        (retry::NEXT_UPSTREAM_ANNOTATION, "error timeout http_502"),
        (retry::NEXT_UPSTREAM_TRIES_ANNOTATION, "5"),
        (retry::NEXT_UPSTREAM_TIMEOUT_ANNOTATION, "10"),
        (retry::CONNECT_TIMEOUT_ANNOTATION, "2"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into()
}

#[test]
fn retries_follow_ingress_nginx_defaults_and_annotations() {
    let text = render(&build(vec![web_ingress()]), &opts());
    // ingress-nginx's ConfigMap defaults, for every location.
    let http = text.split("server {").next().unwrap();
    for d in [
        "proxy_next_upstream error timeout;",
        "proxy_next_upstream_tries 3;",
        "proxy_next_upstream_timeout 0;",
        "proxy_connect_timeout 5s;",
    ] {
        assert!(http.contains(d), "missing {d} in the http block:\n{text}");
    }
    // nginx's default: a non-idempotent request is not passed on once sent.
    assert!(!text.contains("non_idempotent"), "{text}");

    let mut ing = (*web_ingress()).clone();
    ing.metadata.annotations = Some(retry_annotations());
    let m = build(vec![Arc::new(ing.clone())]);
    assert!(m.rejected.is_empty(), "{:?}", m.rejected);
    let text = render(&m, &opts());
    let web = text.split("server_name web.example.test;").nth(1).unwrap();
    for d in [
        "proxy_next_upstream error timeout http_502;",
        "proxy_next_upstream_tries 5;",
        "proxy_next_upstream_timeout 10s;",
        "proxy_connect_timeout 2s;",
    ] {
        // Both of web's paths (`/` and `/api` twice: `= /api` and `/api/`).
        assert_eq!(web.matches(d).count(), 3, "{d}:\n{text}");
    }

    // A value nginx must not be given leaves the Ingress out, named in its Event.
    ing.metadata.annotations = Some(
        [(
            retry::NEXT_UPSTREAM_TRIES_ANNOTATION.to_string(),
            "3; include /etc/passwd".to_string(),
        )]
        .into(),
    );
    let m = build(vec![Arc::new(ing)]);
    let text = render(&m, &opts());
    assert!(!text.contains("passwd"), "{text}");
    assert_eq!(m.rejected.len(), 1, "{:?}", m.rejected);
    assert_eq!(m.rejected[0].reason, "BadConfig");
    assert!(
        m.rejected[0]
            .message
            .starts_with(retry::NEXT_UPSTREAM_TRIES_ANNOTATION),
        "{}",
        m.rejected[0].message
    );
}

#[test]
fn wildcard_host_covers_exactly_one_label() {
    let ing = ingress(
        "w",
        Some("keelson"),
        json!({"rules": [
            rule(Some("*.example.test"), json!([path("/", "Prefix", "web", json!({"name": "http"}))])),
            rule(Some("a*b.example.test"), json!([path("/", "Prefix", "web", json!({"name": "http"}))])),
        ]}),
    );
    let m = build(vec![ing]);
    let text = render(&m, &opts());
    assert_contains(&text, "server_name ~^[^.]+\\.example\\.test$;");
    assert!(!text.contains("a*b"), "{text}");
    assert_eq!(m.problems.len(), 1, "{:?}", m.problems);
}

#[test]
fn paths_nginx_cannot_take_are_skipped_and_reported() {
    let ing = one_host(
        "p",
        "p.test",
        json!([
            path("/ok", "Prefix", "web", json!({"name": "http"})),
            path("/a;return 200 x", "Prefix", "web", json!({"name": "http"})),
            path("/b{", "Exact", "web", json!({"name": "http"})),
        ]),
    );
    let m = build(vec![ing]);
    assert_eq!(server(&m, Some("p.test")).locations.len(), 1);
    assert_eq!(m.problems.len(), 2, "{:?}", m.problems);
    let text = render(&m, &opts());
    assert!(
        !text.contains("return 200") && !text.contains("/b{"),
        "{text}"
    );
}

#[test]
fn rendered_config_passes_real_nginx_test() {
    let dir = tempfile::Builder::new()
        .prefix("keelson-ingress-render")
        .tempdir()
        .unwrap();
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let o = RenderOptions {
        conf_dir: dir.path().to_path_buf(),
        ..opts()
    };
    let ing = ingress(
        "d",
        Some("keelson"),
        json!({"defaultBackend": {"service": {"name": "empty", "port": {"name": "http"}}}, "rules": [rule(None, json!([path("/e", "Exact", "web", json!({"name": "http"}))]))]}),
    );
    let mut wildcard = (*one_host(
        "w",
        "*.example.test",
        json!([path("/", "Prefix", "web", json!({"name": "http"}))]),
    ))
    .clone();
    // Every retry setting, so nginx judges the directives they become too.
    wildcard.metadata.annotations = Some(retry_annotations());
    let text = render(&build(vec![web_ingress(), ing, Arc::new(wildcard)]), &o);
    assert!(text.contains("proxy_next_upstream_timeout 10s;"), "{text}");
    let conf = dir.path().join("nginx.conf");
    std::fs::write(&conf, &text).unwrap();
    let out = std::process::Command::new("nginx")
        .arg("-t")
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&conf)
        .output()
        .expect("nginx must be installed (apt-get install nginx-light)");
    assert!(
        out.status.success(),
        "nginx -t: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tls_secret(name: &str, kind: &str, cert: &str) -> Arc<k8s_openapi::api::core::v1::Secret> {
    use k8s_openapi::ByteString;
    let mut s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default"}, "type": kind}),
    )
    .unwrap();
    s.data = Some(
        [
            (
                "tls.crt".to_string(),
                ByteString(
                    format!("-----BEGIN CERTIFICATE-----\n{cert}\n-----END CERTIFICATE-----\n")
                        .into_bytes(),
                ),
            ),
            (
                "tls.key".to_string(),
                ByteString(
                    b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n".to_vec(),
                ),
            ),
        ]
        .into(),
    );
    Arc::new(s)
}

#[test]
fn tls_hosts_listen_with_their_secrets_certificate() {
    let mut ing = (*web_ingress()).clone();
    ing.spec.as_mut().unwrap().tls = Some(vec![serde_json::from_value(
        json!({"hosts": ["web.example.test"], "secretName": "web-tls"}),
    )
    .unwrap()]);
    let other = ingress(
        "plain",
        Some("keelson"),
        json!({"tls": [{"hosts": ["plain.test"], "secretName": "opaque"}], "rules": [rule(Some("plain.test"), json!([path("/", "Prefix", "web", json!({"name": "http"}))]))]}),
    );
    let mut inputs = cluster(vec![Arc::new(ing), other]);
    inputs.secrets = vec![
        tls_secret("web-tls", "kubernetes.io/tls", "AAAA"),
        tls_secret("opaque", "Opaque", "BBBB"),
    ];
    let m = model::build(&inputs, OURS);
    assert_eq!(
        m.certs.len(),
        1,
        "only the kubernetes.io/tls Secret is used"
    );
    let file = &m.certs[0].file;
    assert!(
        file.starts_with("default_web-tls-") && file.ends_with(".pem"),
        "{file}"
    );
    assert!(m.certs[0].pem.contains("AAAA") && m.certs[0].pem.contains("PRIVATE KEY"));
    assert_eq!(
        server(&m, Some("web.example.test")).tls.as_ref(),
        Some(file)
    );
    assert_eq!(server(&m, Some("plain.test")).tls, None);
    let text = render(&m, &opts());
    let web = &text[text.find("server_name web.example.test").unwrap()..];
    assert!(web.starts_with(&format!(
        "server_name web.example.test;\n        listen 127.0.0.1:8443 ssl;\n        ssl_certificate /tmp/keelson-ingress-render/certs/{file};"
    )), "{text}");
    assert_eq!(text.matches(" ssl;").count(), 1, "{text}");
    // Unknown names over HTTPS meet the default server, which refuses the handshake.
    assert!(text.contains("listen 127.0.0.1:8080 default_server;\n        listen 127.0.0.1:8443 ssl default_server;\n        ssl_reject_handshake on;"), "{text}");
    // Plain HTTP to a TLS host is redirected, as ingress-nginx does by default.
    assert!(
        web.contains(
            "if ($scheme = http) {\n            return 308 https://$host:8443$request_uri;"
        ),
        "{text}"
    );
    assert_eq!(text.matches("return 308").count(), 1, "{text}");

    // A renewed certificate is a new file name, hence a new text and a reload.
    inputs.secrets[0] = tls_secret("web-tls", "kubernetes.io/tls", "CCCC");
    let renewed = model::build(&inputs, OURS);
    assert_ne!(&renewed.certs[0].file, file);

    // One Ingress of the host opting out turns the redirect off.
    let mut no_redirect = (*inputs.ingresses[0]).clone();
    no_redirect.metadata.annotations = Some(
        [(
            model::SSL_REDIRECT_ANNOTATION.to_string(),
            "false".to_string(),
        )]
        .into(),
    );
    inputs.ingresses[0] = Arc::new(no_redirect);
    let m = model::build(&inputs, OURS);
    assert!(server(&m, Some("web.example.test")).tls.is_some());
    assert!(!render(&m, &opts()).contains("return 308"));
}
