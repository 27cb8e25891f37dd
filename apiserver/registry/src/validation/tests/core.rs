use super::{fields, pair};
use crate::apply_defaults;
use crate::validation::validate;
use serde_json::json;

#[test]
fn config_maps_and_secrets() {
    let cm = json!({"metadata": {"name": "cfg"}, "data": {"app.conf": "x", "a/b": "y"}});
    assert_eq!(
        fields("ConfigMap", cm),
        vec![pair("FieldValueInvalid", "data[a/b]")]
    );
    let s = json!({"metadata": {"name": "s"}, "data": {"user": "YWRtaW4=", "pw": "not base64!"},
        "stringData": {"token": "abc"}});
    let mut defaulted = s.clone();
    apply_defaults("Secret", &mut defaulted);
    assert_eq!(defaulted["data"]["token"], "YWJj");
    assert!(defaulted.get("stringData").is_none());
    assert_eq!(
        fields("Secret", s),
        vec![pair("FieldValueInvalid", "data[pw]")]
    );
    let tls =
        json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}});
    assert_eq!(
        fields("Secret", tls),
        vec![pair("FieldValueRequired", "data[tls.key]")]
    );
    let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {}});
    let mut new = old.clone();
    new["data"]["k"] = json!("dg==");
    let c = validate("Secret", &new, Some(&old));
    assert_eq!(
        c.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["data"]
    );
}

#[test]
fn small_kinds() {
    let lease = json!({"metadata": {"name": "n1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 0}});
    assert_eq!(
        fields("Lease", lease),
        vec![pair("FieldValueInvalid", "spec.leaseDurationSeconds")]
    );
    let event = json!({"metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "other"}});
    assert_eq!(
        fields("Event", event),
        vec![pair("FieldValueInvalid", "involvedObject.namespace")]
    );
    let node_event = json!({"metadata": {"name": "n1.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"}});
    assert_eq!(fields("Event", node_event), vec![]);
    let node = json!({"metadata": {"name": "n1"}, "spec": {"podCIDRs": ["10.244.0.0/24"],
        "taints": [{"key": "x", "effect": "Sometimes"}]}});
    assert_eq!(
        fields("Node", node),
        vec![pair("FieldValueNotSupported", "spec.taints[0].effect")]
    );
    let sa = json!({"metadata": {"name": "default", "namespace": "default"}});
    assert_eq!(fields("ServiceAccount", sa), vec![]);
    let ns = json!({"metadata": {"name": "team-a"}});
    assert_eq!(fields("Namespace", ns), vec![]);
}

#[test]
fn node_pod_cidrs_are_routable_ranges() {
    let node = |spec: serde_json::Value| json!({"metadata": {"name": "n1"}, "spec": spec});
    let ok =
        node(json!({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:1::/64"]}));
    assert_eq!(fields("Node", ok), vec![]);
    let everything = node(json!({"podCIDR": "0.0.0.0/0", "podCIDRs": ["0.0.0.0/0"]}));
    assert_eq!(
        fields("Node", everything),
        vec![
            pair("FieldValueInvalid", "spec.podCIDR"),
            pair("FieldValueInvalid", "spec.podCIDRs[0]")
        ]
    );
    let two_v4 = node(json!({"podCIDRs": ["10.244.1.0/24", "10.244.2.0/24"]}));
    assert_eq!(
        fields("Node", two_v4),
        vec![pair("FieldValueInvalid", "spec.podCIDRs")]
    );
    let bad = node(json!({"podCIDRs": ["10.244.1.0/33"]}));
    assert_eq!(
        fields("Node", bad),
        vec![pair("FieldValueInvalid", "spec.podCIDRs[0]")]
    );
}
