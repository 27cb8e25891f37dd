use super::{causes, fields, pair};
use crate::apply_defaults;
use crate::validation::validate;
use serde_json::{json, Value};

#[test]
fn endpoint_slices() {
    let ok = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 80}]});
    assert_eq!(causes("EndpointSlice", ok.clone()), vec![]);
    let bad = json!({"metadata": {"name": "web-abc"},
        "endpoints": [{"addresses": []}], "ports": [{"port": 80}]});
    assert_eq!(
        fields("EndpointSlice", bad),
        vec![
            pair("FieldValueRequired", "addressType"),
            pair("FieldValueRequired", "endpoints[0].addresses")
        ]
    );
    let mut wrong = ok.clone();
    wrong["endpoints"][0]["addresses"] = json!(["fd00::1"]);
    assert_eq!(
        fields("EndpointSlice", wrong.clone()),
        vec![pair("FieldValueInvalid", "endpoints[0].addresses[0]")]
    );
    wrong["addressType"] = json!("IPv6");
    apply_defaults("EndpointSlice", &mut wrong);
    let got = validate("EndpointSlice", &wrong, Some(&ok));
    assert_eq!(
        got.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["addressType"]
    );
}

#[test]
fn endpoints() {
    let e = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.300"}],
        "ports": [{"port": 80}, {"name": "b", "port": 81}]}]});
    assert_eq!(
        fields("Endpoints", e),
        vec![
            pair("FieldValueInvalid", "subsets[0].addresses[0].ip"),
            pair("FieldValueRequired", "subsets[0].ports[0].name")
        ]
    );
}
fn ingress(paths: Value) -> Value {
    json!({"metadata": {"name": "web"}, "spec": {"ingressClassName": "keelson",
        "rules": [{"host": "web.example.test", "http": {"paths": paths}}]}})
}
#[test]
fn ingress_paths() {
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let ok = ingress(json!([{"path": "/", "pathType": "Prefix", "backend": backend}]));
    assert_eq!(causes("Ingress", ok), vec![]);
    let bad = ingress(json!([{"path": "/", "backend": backend},
        {"path": "api", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {}}}}]));
    let c = causes("Ingress", bad);
    let got: Vec<(&str, &str)> = c
        .iter()
        .map(|c| (c.reason.as_str(), c.field.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("FieldValueRequired", "spec.rules[0].http.paths[0].pathType"),
            ("FieldValueInvalid", "spec.rules[0].http.paths[1].path"),
            (
                "FieldValueInvalid",
                "spec.rules[0].http.paths[1].backend.service.port"
            ),
        ]
    );
    assert_eq!(c[0].message, "Required value: pathType must be specified");
    let ip_host = json!({"metadata": {"name": "x"}, "spec": {"rules": [{"host": "10.0.0.1"}]}});
    assert_eq!(
        fields("Ingress", ip_host),
        vec![pair("FieldValueInvalid", "spec.rules[0].host")]
    );
    let empty = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(
        fields("Ingress", empty),
        vec![pair("FieldValueInvalid", "spec")]
    );
}

#[test]
fn ingress_classes() {
    let ok =
        json!({"metadata": {"name": "keelson"}, "spec": {"controller": "keelson.dev/ingress"}});
    assert_eq!(causes("IngressClass", ok.clone()), vec![]);
    let bad = json!({"metadata": {"name": "x"}, "spec": {"controller": "nginx"}});
    assert_eq!(
        fields("IngressClass", bad.clone()),
        vec![pair("FieldValueInvalid", "spec.controller")]
    );
    let none = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(
        fields("IngressClass", none),
        vec![pair("FieldValueRequired", "spec.controller")]
    );
    let mut changed = ok.clone();
    changed["spec"]["controller"] = json!("other.dev/ingress");
    let c = validate("IngressClass", &changed, Some(&ok));
    assert_eq!(
        c.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["spec.controller"]
    );
}

#[test]
fn endpoint_slices_point_at_pods_only() {
    let slice = |addresses: Value| {
        json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "endpoints": [{"addresses": addresses}], "ports": [{"name": "http", "port": 80}]})
    };
    for (ip, msg) in [
        (
            "127.0.0.1",
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ),
        (
            "169.254.169.254",
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ),
        ("0.0.0.0", "may not be unspecified (0.0.0.0)"),
    ] {
        let got = causes("EndpointSlice", slice(json!([ip])));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].field, "endpoints[0].addresses[0]");
        assert_eq!(got[0].message, format!("Invalid value: {ip:?}: {msg}"));
    }
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"addresses": [format!("10.1.{}.{}", i / 250, i % 250 + 1)]}))
        .collect();
    let mut big = slice(json!(["10.0.0.1"]));
    big["endpoints"] = json!(many);
    let got = causes("EndpointSlice", big);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].reason.as_str(), got[0].field.as_str()),
        ("FieldValueTooMany", "endpoints")
    );
    assert_eq!(
        got[0].message,
        "Too many: 1001: must have at most 1000 items"
    );
    let e = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "::1"}]}]});
    assert_eq!(
        fields("Endpoints", e),
        vec![pair("FieldValueInvalid", "subsets[0].addresses[0].ip")]
    );
}
