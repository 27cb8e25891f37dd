//! A corpus of Services and EndpointSlices covering every feature, as the API would serve them.

// Each test crate uses a different part of the corpus.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_proxy::from_k8s::build_model;
use keelson_proxy::model::ProxyModel;
use serde_json::{json, Value};

pub const NODE: &str = "node-a";

fn svc(v: Value) -> Service {
    serde_json::from_value(v).expect("corpus service")
}

fn slice(v: Value) -> EndpointSlice {
    serde_json::from_value(v).expect("corpus slice")
}

fn ep(ip: &str, node: &str, ready: bool, serving: bool, terminating: bool) -> Value {
    json!({"addresses": [ip], "nodeName": node,
           "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
}

fn slice_of(name: &str, svc: &str, ports: Value, eps: Vec<Value>) -> EndpointSlice {
    slice(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4", "ports": ports, "endpoints": eps
    }))
}

pub fn node() -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.168.50.10"},
                                 {"type": "Hostname", "address": NODE}]}
    }))
    .expect("corpus node")
}

pub fn services() -> Vec<Service> {
    vec![
        // Two ports; "http" targets a named port that resolves differently per pod.
        svc(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "ports": [
                {"name": "http", "port": 80, "targetPort": "http"},
                {"name": "metrics", "port": 9100, "targetPort": 9100}]}})),
        // TCP and UDP on one port number.
        svc(json!({"metadata": {"name": "dns", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.53", "ports": [
                {"name": "dns-udp", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}})),
        // NodePort with ClientIP affinity.
        svc(
            json!({"metadata": {"name": "sticky", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.20",
                     "sessionAffinity": "ClientIP",
                     "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
                     "ports": [{"port": 80, "nodePort": 30080, "targetPort": 8080}]}}),
        ),
        // Local traffic policies, one local and one remote endpoint.
        svc(
            json!({"metadata": {"name": "local", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.30",
                     "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
                     "ports": [{"port": 80, "nodePort": 30090, "targetPort": 8080}]}}),
        ),
        // External IPs.
        svc(json!({"metadata": {"name": "ext", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.40", "externalIPs": ["192.168.99.10"],
                     "ports": [{"port": 443, "targetPort": 8443}]}})),
        // No endpoints at all: rejected at once.
        svc(
            json!({"metadata": {"name": "empty", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.50",
                     "ports": [{"port": 80, "nodePort": 30100}]}}),
        ),
        // Only a terminating-but-serving endpoint besides an unready one: fallback.
        svc(
            json!({"metadata": {"name": "draining", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.60", "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
        // internalTrafficPolicy Local with no endpoint on this node: dropped.
        svc(
            json!({"metadata": {"name": "elsewhere", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.70", "internalTrafficPolicy": "Local",
                     "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
        // Skipped: headless and ExternalName.
        svc(
            json!({"metadata": {"name": "headless", "namespace": "default"},
            "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
        ),
        svc(
            json!({"metadata": {"name": "alias", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "example.invalid"}}),
        ),
    ]
}

pub fn slices() -> Vec<EndpointSlice> {
    vec![
        slice_of(
            "web-a",
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9100, "protocol": "TCP"}]),
            vec![
                ep("10.244.1.2", NODE, true, true, false),
                ep("10.244.2.3", "node-b", false, false, false),
            ],
        ),
        slice_of(
            "web-b",
            "web",
            json!([{"name": "http", "port": 8081, "protocol": "TCP"}, {"name": "metrics", "port": 9100, "protocol": "TCP"}]),
            vec![ep("10.244.2.4", "node-b", true, true, false)],
        ),
        slice_of(
            "dns-a",
            "dns",
            json!([{"name": "dns-udp", "port": 5353, "protocol": "UDP"}, {"name": "dns-tcp", "port": 5353, "protocol": "TCP"}]),
            vec![
                ep("10.244.1.5", NODE, true, true, false),
                ep("10.244.2.5", "node-b", true, true, false),
            ],
        ),
        slice_of(
            "sticky-a",
            "sticky",
            json!([{"port": 8080, "protocol": "TCP"}]),
            vec![
                ep("10.244.1.6", NODE, true, true, false),
                ep("10.244.2.6", "node-b", true, true, false),
            ],
        ),
        slice_of(
            "local-a",
            "local",
            json!([{"port": 8080, "protocol": "TCP"}]),
            vec![
                ep("10.244.1.7", NODE, true, true, false),
                ep("10.244.2.7", "node-b", true, true, false),
            ],
        ),
        slice_of(
            "ext-a",
            "ext",
            json!([{"port": 8443, "protocol": "TCP"}]),
            vec![ep("10.244.2.8", "node-b", true, true, false)],
        ),
        slice_of(
            "draining-a",
            "draining",
            json!([{"port": 8080, "protocol": "TCP"}]),
            vec![
                ep("10.244.1.9", NODE, false, true, true),
                ep("10.244.2.9", "node-b", false, false, false),
            ],
        ),
        slice_of(
            "elsewhere-a",
            "elsewhere",
            json!([{"port": 8080, "protocol": "TCP"}]),
            vec![ep("10.244.2.10", "node-b", true, true, false)],
        ),
        slice_of(
            "headless-a",
            "headless",
            json!([{"port": 80, "protocol": "TCP"}]),
            vec![ep("10.244.2.11", "node-b", true, true, false)],
        ),
    ]
}

/// The corpus as the proxy sees it.
pub fn model() -> ProxyModel {
    model_of(&services(), &slices())
}

pub fn model_of(services: &[Service], slices: &[EndpointSlice]) -> ProxyModel {
    let node = node();
    let s: Vec<&Service> = services.iter().collect();
    let e: Vec<&EndpointSlice> = slices.iter().collect();
    build_model(NODE, Some(&node), &s, &e)
}

/// The corpus after one change: the unready web endpoint became ready.
pub fn changed_model() -> ProxyModel {
    let mut slices = slices();
    if let Some(eps) = slices[0].endpoints.as_mut() {
        if let Some(c) = eps[1].conditions.as_mut() {
            c.ready = Some(true);
            c.serving = Some(true);
        }
    }
    model_of(&services(), &slices)
}
