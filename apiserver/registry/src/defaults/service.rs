//! Service defaults (SetDefaults_Service and the REST layer's IP family defaults).

use crate::json::{default, each_object_mut, is_unset, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn service(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    if is_unset(spec, "type") {
        spec.insert("type".into(), json!("ClusterIP"));
    }
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        if let Some(client_ip) =
            object_mut(spec, "sessionAffinityConfig").and_then(|c| object_mut(c, "clientIP"))
        {
            default(client_ip, "timeoutSeconds", json!(10800));
        }
    }
    each_object_mut(spec, "ports", |p| {
        if is_unset(p, "protocol") {
            p.insert("protocol".into(), json!("TCP"));
        }
        if is_unset(p, "targetPort") {
            if let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    });
    if kind == "ExternalName" {
        return;
    }
    default(spec, "internalTrafficPolicy", json!("Cluster"));
    if kind == "NodePort" || kind == "LoadBalancer" {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    cluster_ips(spec);
}

/// Keeps `clusterIP` and `clusterIPs[0]` in step and records a single IP family.
fn cluster_ips(spec: &mut Map<String, Value>) {
    let first = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .cloned();
    match (is_unset(spec, "clusterIP"), first) {
        (true, Some(ip)) => {
            spec.insert("clusterIP".into(), ip);
        }
        (false, None) => {
            let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        _ => {}
    }
    let ip = spec.get("clusterIP").and_then(Value::as_str).unwrap_or("");
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    default(spec, "ipFamilies", json!([family]));
    default(spec, "ipFamilyPolicy", json!("SingleStack"));
}
