//! Service rules (ValidateService, ValidateServiceUpdate). NodePort ranges and ClusterIP
//! allocation are checked by the server, which knows the configured ranges.

use super::container::port_range;
use super::field_checks::{int_field, int_or_name_port, labels, name_check, one_of, PROTOCOLS};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};
use std::collections::HashSet;

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

pub(crate) fn service(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    one_of(spec, "type", TYPES, true, &path, out);
    let kind = str_at(spec, "type");
    let cluster_ip = str_at(spec, "clusterIP");
    let headless = cluster_ip == "None";
    if kind == "ExternalName" {
        let name = str_at(spec, "externalName");
        if name.is_empty() {
            out.push(Cause::required(path.child("externalName"), ""));
        } else {
            let trimmed = name.strip_suffix('.').unwrap_or(name);
            name_check(
                names::dns1123_subdomain(trimmed),
                &path.child("externalName"),
                name,
                out,
            );
        }
    } else if items(spec, "ports").is_empty() && !headless {
        out.push(Cause::required(path.child("ports"), ""));
    }
    cluster_ips(spec, &path, out);
    if headless && (kind == "NodePort" || kind == "LoadBalancer") {
        let msg = "may not be set to 'None' for LoadBalancer or NodePort services";
        out.push(Cause::invalid(
            path.child("clusterIPs").index(0),
            &json!("None"),
            msg,
        ));
    }
    if kind == "ExternalName" && !items(spec, "clusterIPs").is_empty() {
        let msg = "may not be set for ExternalName services";
        out.push(Cause::forbidden(path.child("clusterIPs"), msg));
    }
    ports(spec, kind, &path.child("ports"), out);
    labels(spec.get("selector"), &path.child("selector"), out);
    one_of(
        spec,
        "sessionAffinity",
        &["ClientIP", "None"],
        true,
        &path,
        out,
    );
    let policies = ["Cluster", "Local"];
    one_of(spec, "externalTrafficPolicy", &policies, false, &path, out);
    one_of(spec, "internalTrafficPolicy", &policies, false, &path, out);
    let families = path.child("ipFamilies");
    for (i, f) in items(spec, "ipFamilies").iter().enumerate() {
        if !matches!(f.as_str(), Some("IPv4" | "IPv6")) {
            out.push(Cause::not_supported(
                families.index(i),
                f,
                &["IPv4", "IPv6"],
            ));
        }
    }
    let fam_policies = ["SingleStack", "PreferDualStack", "RequireDualStack"];
    one_of(spec, "ipFamilyPolicy", &fam_policies, false, &path, out);
    // The proxy captures traffic to these on every node: never node-local addresses
    // (upstream's ValidateNonSpecialIP).
    for (i, ip) in items(spec, "externalIPs").iter().enumerate() {
        for msg in names::endpoint_ip(ip.as_str().unwrap_or_default()) {
            out.push(Cause::invalid(path.child("externalIPs").index(i), ip, &msg));
        }
    }
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        cluster_ip_update(spec, old_spec, &path, out);
    }
}

fn cluster_ips(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let ip = str_at(spec, "clusterIP");
    if !ip.is_empty() && ip != "None" && !names::is_ip(ip) {
        let msg = "must be empty, 'None', or a valid IP address";
        out.push(Cause::invalid(path.child("clusterIP"), &json!(ip), msg));
    }
    let ips = items(spec, "clusterIPs");
    if let Some(first) = ips.first() {
        if !ip.is_empty() && first.as_str() != Some(ip) {
            let msg = "must match `clusterIP` when set";
            out.push(Cause::invalid(
                path.child("clusterIPs").index(0),
                first,
                msg,
            ));
        }
    }
}

fn ports(spec: &Value, kind: &str, path: &Path, out: &mut Vec<Cause>) {
    let list = items(spec, "ports");
    let mut port_names = HashSet::new();
    let mut port_protocols = HashSet::new();
    for (i, p) in list.iter().enumerate() {
        let pp = path.index(i);
        let name = str_at(p, "name");
        if name.is_empty() {
            if list.len() > 1 {
                out.push(Cause::required(pp.child("name"), ""));
            }
        } else {
            name_check(names::dns1123_label(name), &pp.child("name"), name, out);
            if !port_names.insert(name) {
                out.push(Cause::duplicate(pp.child("name"), &json!(name)));
            }
        }
        let port = int_field(p, "port", &pp, out);
        match port {
            None => out.push(Cause::required(pp.child("port"), "")),
            Some(n) => port_range(n, &pp.child("port"), out),
        }
        one_of(p, "protocol", PROTOCOLS, true, &pp, out);
        if let Some(n) = port {
            let key = (n, str_at(p, "protocol"));
            if !port_protocols.insert(key) {
                out.push(Cause::duplicate(
                    &pp,
                    &json!({"port": n, "protocol": key.1}),
                ));
            }
        }
        if let Some(target) = p.get("targetPort").filter(|t| !t.is_null()) {
            int_or_name_port(Some(target), &pp.child("targetPort"), out);
        }
        let node_port = int_field(p, "nodePort", &pp, out).unwrap_or(0);
        if node_port != 0 && (kind == "ClusterIP" || kind == "ExternalName") {
            let msg = format!("may not be used when `type` is '{kind}'");
            out.push(Cause::forbidden(pp.child("nodePort"), &msg));
        }
    }
}

/// The ClusterIP stays once set, except when switching to or from ExternalName. An empty new
/// value means "keep": the server copies the allocated IP over before storing.
fn cluster_ip_update(new: &Value, old: &Value, path: &Path, out: &mut Vec<Cause>) {
    let (new_ip, old_ip) = (str_at(new, "clusterIP"), str_at(old, "clusterIP"));
    let external = str_at(new, "type") == "ExternalName" || str_at(old, "type") == "ExternalName";
    if !external && !old_ip.is_empty() && !new_ip.is_empty() && new_ip != old_ip {
        out.push(Cause::invalid(
            path.child("clusterIP"),
            &json!(new_ip),
            "field is immutable",
        ));
    }
}
