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

fn policy(spec: Value) -> Value {
    json!({"metadata": {"name": "db", "namespace": "default"}, "spec": spec})
}

/// (field, message) of each cause, as kubectl prints them.
fn messages(kind: &str, obj: Value) -> Vec<(String, String)> {
    causes(kind, obj)
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect()
}

fn message(field: &str, text: &str) -> (String, String) {
    (field.to_string(), text.to_string())
}

#[test]
fn network_policies_accept_what_upstream_accepts() {
    let ok = policy(json!({"podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"team": "web"}},
             "podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}},
            {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.2.3.4/32"]}}],
            "ports": [{"port": "postgres"}, {"port": 5432, "endPort": 5440, "protocol": "TCP"},
                {"port": 53, "endPort": 53, "protocol": "UDP"}, {"protocol": "SCTP"}]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "fd00::/64", "except": ["fd00::1/128"]}}]}, {}],
        "policyTypes": ["Ingress", "Egress"]}));
    assert_eq!(causes("NetworkPolicy", ok), vec![]);
    assert_eq!(causes("NetworkPolicy", policy(json!({}))), vec![]);
    // Upstream checks the count of policyTypes, not repeats.
    let repeated = policy(json!({"policyTypes": ["Ingress", "Ingress"]}));
    assert_eq!(causes("NetworkPolicy", repeated), vec![]);
}

#[test]
fn network_policy_ports() {
    let ports = |ports: Value| policy(json!({"ingress": [{"ports": ports}]}));
    let p = "spec.ingress[0].ports";
    assert_eq!(
        messages(
            "NetworkPolicy",
            ports(json!([{"port": 8080, "endPort": 80}, {"port": 0, "protocol": "ICMP"},
                {"port": "http", "endPort": 90}, {"endPort": 90}, {"port": 70000, "endPort": 70001},
                {"port": "HTTP"}]))
        ),
        vec![
            message(
                &format!("{p}[0].endPort"),
                "Invalid value: 8080: must be greater than or equal to `port`"
            ),
            message(
                &format!("{p}[1].protocol"),
                "Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\""
            ),
            message(
                &format!("{p}[1].port"),
                "Invalid value: 0: must be between 1 and 65535, inclusive"
            ),
            message(
                &format!("{p}[2].endPort"),
                "Invalid value: 90: may not be specified when `port` is non-numeric"
            ),
            message(
                &format!("{p}[3].endPort"),
                "Invalid value: 90: may not be specified when `port` is not specified"
            ),
            message(
                &format!("{p}[4].port"),
                "Invalid value: 70000: must be between 1 and 65535, inclusive"
            ),
            message(
                &format!("{p}[4].endPort"),
                "Invalid value: 70001: must be between 1 and 65535, inclusive"
            ),
            message(
                &format!("{p}[5].port"),
                "Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
            ),
            message(
                &format!("{p}[5].port"),
                "Invalid value: \"HTTP\": must contain at least one letter (a-z)"
            ),
        ]
    );
}

#[test]
fn network_policy_peers_and_ip_blocks() {
    let peers = |to: Value| policy(json!({"egress": [{"to": to}]}));
    let p = "spec.egress[0].to";
    let got = messages(
        "NetworkPolicy",
        peers(json!([
            {},
            {"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}},
            {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/16",
                "10.0.0.0/8", "fd00::/120", "10.0.0.0/33", "10.0.1.0/24"]}},
            {"ipBlock": {"cidr": "10.0.0.0"}},
            {"ipBlock": {}},
            {"namespaceSelector": {"matchLabels": {"team": "-x"}}},
        ])),
    );
    let strict = "must be a strict subset of `cidr`";
    let cidr = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
    let except = |i: usize, v: &str, m: &str| {
        message(
            &format!("{p}[2].ipBlock.except[{i}]"),
            &format!("Invalid value: \"{v}\": {m}"),
        )
    };
    assert_eq!(
        got,
        vec![
            message(&format!("{p}[0]"), "Required value: must specify a peer"),
            message(
                &format!("{p}[1]"),
                "Forbidden: may not specify both ipBlock and another peer"
            ),
            except(0, "10.1.0.0/24", strict),
            except(1, "10.0.0.0/16", strict),
            except(2, "10.0.0.0/8", strict),
            except(3, "fd00::/120", strict),
            except(4, "10.0.0.0/33", cidr),
            message(
                &format!("{p}[3].ipBlock.cidr"),
                &format!("Invalid value: \"10.0.0.0\": {cidr}")
            ),
            message(&format!("{p}[4].ipBlock.cidr"), "Required value"),
            message(
                &format!("{p}[5].namespaceSelector.matchLabels"),
                "Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ),
        ]
    );
}

#[test]
fn network_policy_selectors_and_types() {
    let bad = policy(json!({
        "podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
        "policyTypes": ["Ingress", "Other"]}));
    assert_eq!(
        fields("NetworkPolicy", bad),
        vec![
            pair(
                "FieldValueRequired",
                "spec.podSelector.matchExpressions[0].values"
            ),
            pair("FieldValueNotSupported", "spec.policyTypes[1]")
        ]
    );
    let three = policy(json!({"policyTypes": ["Ingress", "Egress", "Other"]}));
    assert_eq!(
        messages("NetworkPolicy", three),
        vec![message(
            "spec.policyTypes",
            "Invalid value: [\"Ingress\",\"Egress\",\"Other\"]: may not specify more than two policyTypes"
        )]
    );
}
