use super::{assert_has, causes, fields, pair};
use crate::apply_defaults;
use crate::validation::validate;
use serde_json::{json, Value};

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec})
}
#[test]
fn a_realistic_service_is_valid() {
    let s = service(json!({"type": "NodePort", "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080},
                  {"name": "https", "port": 443, "targetPort": 8443}]}));
    assert_eq!(causes("Service", s), vec![]);
    let headless = service(json!({"clusterIP": "None", "selector": {"app": "web"}}));
    assert_eq!(causes("Service", headless), vec![]);
}

#[test]
fn service_errors() {
    assert_eq!(
        fields("Service", service(json!({"selector": {"app": "web"}}))),
        vec![pair("FieldValueRequired", "spec.ports")]
    );
    let s = service(json!({"type": "Magic", "selector": {"bad key!": "x"},
        "ports": [{"port": 0}, {"name": "b", "port": 80, "targetPort": 70000, "nodePort": 30001},
                  {"name": "b", "port": 81, "targetPort": "Not_A_Name"}]}));
    let got = fields("Service", s);
    assert_has(
        &got,
        &[
            ("FieldValueNotSupported", "spec.type"),
            ("FieldValueInvalid", "spec.selector"),
            ("FieldValueRequired", "spec.ports[0].name"),
            ("FieldValueInvalid", "spec.ports[0].port"),
            ("FieldValueInvalid", "spec.ports[1].targetPort"),
            ("FieldValueDuplicate", "spec.ports[2].name"),
            ("FieldValueInvalid", "spec.ports[2].targetPort"),
        ],
    );
    let s = service(json!({"ports": [{"port": 80, "nodePort": 30001}]}));
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueForbidden", "spec.ports[0].nodePort")]
    );
    let s = service(json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}));
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueInvalid", "spec.clusterIPs[0]")]
    );
    let s = service(
        json!({"type": "ExternalName", "externalName": "db.example.test",
        "clusterIPs": ["10.96.0.9"]}),
    );
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueForbidden", "spec.clusterIPs")]
    );
    let s = service(json!({"type": "ExternalName"}));
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueRequired", "spec.externalName")]
    );
}

#[test]
fn service_cluster_ip_is_immutable() {
    let mut old = service(json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}));
    apply_defaults("Service", &mut old);
    let mut new = old.clone();
    new["spec"]["ports"][0]["port"] = json!(81);
    assert_eq!(validate("Service", &new, Some(&old)), vec![]);
    new["spec"]["clusterIP"] = json!("10.96.0.11");
    new["spec"]["clusterIPs"] = json!(["10.96.0.11"]);
    let got: Vec<String> = validate("Service", &new, Some(&old))
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(got, vec!["spec.clusterIP"]);
}

#[test]
fn external_ips_are_never_node_local() {
    let spec = |ips: Value| json!({"selector": {"app": "web"}, "ports": [{"port": 80}], "externalIPs": ips});
    assert_eq!(
        fields("Service", service(spec(json!(["203.0.113.7"])))),
        vec![]
    );
    let got = causes(
        "Service",
        service(spec(json!(["127.0.0.1", "169.254.169.254", "x"]))),
    );
    let messages: Vec<(&str, &str)> = got
        .iter()
        .map(|c| (c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        vec![
            ("spec.externalIPs[0]", "Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"),
            ("spec.externalIPs[1]", "Invalid value: \"169.254.169.254\": may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
            ("spec.externalIPs[2]", "Invalid value: \"x\": must be a valid IP address"),
        ]
    );
}
