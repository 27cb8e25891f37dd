//! Service, Endpoints and EndpointSlice rows.

use super::{age, age_col, col, list_with_more, name, name_col, Column};
use crate::json::{int_at, items, map_at, str_at};
use chrono::{DateTime, Utc};
use keelson_apimachinery::labels::format_labels;
use serde_json::{json, Value};

pub(super) fn service_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Type", "string", 0, "type determines how the Service is exposed."),
        col("Cluster-IP", "string", 0, "clusterIP is the IP address of the service and is usually assigned randomly."),
        col("External-IP", "string", 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
        col("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
        age_col(),
        col("Selector", "string", 1, "Route service traffic to pods with label keys and values matching this selector."),
    ]
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    items(v, key)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// IPs or hostnames of a `status.loadBalancer.ingress` list, comma-separated.
pub(super) fn load_balancer_text(status: &Value) -> String {
    let lb = status.get("loadBalancer").unwrap_or(&Value::Null);
    let list: Vec<&str> = items(lb, "ingress")
        .iter()
        .map(|i| match str_at(i, "ip") {
            "" => str_at(i, "hostname"),
            ip => ip,
        })
        .filter(|s| !s.is_empty())
        .collect();
    list.join(",")
}

fn external_ip(spec: &Value, status: &Value) -> String {
    let external = strings(spec, "externalIPs");
    match str_at(spec, "type") {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let lb = load_balancer_text(status);
            let mut all: Vec<String> = lb
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            all.extend(external);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(spec, "externalName").to_string(),
        _ => "<unknown>".to_string(),
    }
}

fn ports_text(spec: &Value) -> String {
    let list: Vec<String> = items(spec, "ports")
        .iter()
        .map(|p| {
            let node_port = match int_at(p, "nodePort").unwrap_or(0) {
                0 => String::new(),
                n => format!(":{n}"),
            };
            let port = int_at(p, "port").unwrap_or(0);
            format!("{port}{node_port}/{}", str_at(p, "protocol"))
        })
        .collect();
    if list.is_empty() {
        "<none>".to_string()
    } else {
        list.join(",")
    }
}

pub(super) fn service_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let status = obj.get("status").unwrap_or(&empty);
    let cluster_ip = items(spec, "clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(spec, "clusterIP"));
    let cluster_ip = if cluster_ip.is_empty() {
        "<none>"
    } else {
        cluster_ip
    };
    vec![
        name(obj),
        json!(str_at(spec, "type")),
        json!(cluster_ip),
        json!(external_ip(spec, status)),
        json!(ports_text(spec)),
        age(obj, now),
        json!(format_labels(map_at(spec, "selector"))),
    ]
}

pub(super) fn endpoints_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Endpoints", "string", 0, "Endpoints of the service"),
        age_col(),
    ]
}

/// Upstream's formatEndpoints: ready "ip:port" pairs (or bare IPs without ports), at most three.
fn endpoints_text(obj: &Value) -> String {
    let subsets = items(obj, "subsets");
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list = Vec::new();
    for ss in subsets {
        let ips: Vec<&str> = items(ss, "addresses")
            .iter()
            .map(|a| str_at(a, "ip"))
            .collect();
        let ports = items(ss, "ports");
        if ports.is_empty() {
            list.extend(ips.iter().map(|ip| ip.to_string()));
        }
        for p in ports {
            let port = int_at(p, "port").unwrap_or(0);
            for ip in &ips {
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip.to_string()
                };
                list.push(format!("{host}:{port}"));
            }
        }
    }
    list_with_more(&list, 3, "")
}

pub(super) fn endpoints_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name(obj), json!(endpoints_text(obj)), age(obj, now)]
}

pub(super) fn endpoint_slice_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "AddressType",
            "string",
            0,
            "Type of address carried by this EndpointSlice",
        ),
        col("Ports", "string", 0, "Ports of the endpoints"),
        col("Endpoints", "string", 0, "Endpoints in the EndpointSlice"),
        age_col(),
    ]
}

pub(super) fn endpoint_slice_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let ports: Vec<String> = items(obj, "ports")
        .iter()
        .map(|p| match (int_at(p, "port"), str_at(p, "name")) {
            (Some(n), _) => n.to_string(),
            (None, "") => "*".to_string(),
            (None, name) => name.to_string(),
        })
        .collect();
    let addresses: Vec<String> = items(obj, "endpoints")
        .iter()
        .flat_map(|e| items(e, "addresses"))
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    vec![
        name(obj),
        json!(str_at(obj, "addressType")),
        json!(list_with_more(&ports, 3, "<unset>")),
        json!(list_with_more(&addresses, 3, "<unset>")),
        age(obj, now),
    ]
}
