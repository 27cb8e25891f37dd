//! Endpoints, EndpointSlice, Ingress, IngressClass and NetworkPolicy rules.

use super::container::port_range;
use super::field_checks::{immutable, int_field, label_selector, name_check, one_of, PROTOCOLS};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};
use std::collections::HashSet;

pub(crate) fn endpoints(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("subsets");
    for (i, ss) in items(obj, "subsets").iter().enumerate() {
        let sp = path.index(i);
        for key in ["addresses", "notReadyAddresses"] {
            for (j, a) in items(ss, key).iter().enumerate() {
                let ip_path = sp.child(key).index(j).child("ip");
                let ip = str_at(a, "ip");
                if ip.is_empty() {
                    out.push(Cause::required(ip_path, ""));
                } else {
                    for msg in names::endpoint_ip(ip) {
                        out.push(Cause::invalid(&ip_path, &json!(ip), &msg));
                    }
                }
            }
        }
        let ports = items(ss, "ports");
        for (j, p) in ports.iter().enumerate() {
            let pp = sp.child("ports").index(j);
            let name = str_at(p, "name");
            if name.is_empty() && ports.len() > 1 {
                out.push(Cause::required(pp.child("name"), ""));
            } else if !name.is_empty() {
                name_check(names::dns1123_label(name), &pp.child("name"), name, out);
            }
            match int_field(p, "port", &pp, out) {
                Some(n) => port_range(n, &pp.child("port"), out),
                None => out.push(Cause::required(pp.child("port"), "")),
            }
            one_of(p, "protocol", PROTOCOLS, true, &pp, out);
        }
    }
}

fn address_ok(kind: &str, address: &str) -> Result<(), String> {
    let ok = match kind {
        "IPv4" => address.parse::<std::net::Ipv4Addr>().is_ok(),
        "IPv6" => address.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => {
            return names::dns1123_subdomain(address)
                .into_iter()
                .next()
                .map_or(Ok(()), Err)
        }
    };
    if !ok {
        return Err(format!("must be a valid {kind} address"));
    }
    names::endpoint_ip(address)
        .into_iter()
        .next()
        .map_or(Ok(()), Err)
}

/// Upstream's maxEndpoints and maxAddresses of an EndpointSlice.
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;

pub(crate) fn endpoint_slice(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let root = Path::root();
    let kinds = ["FQDN", "IPv4", "IPv6"];
    one_of(obj, "addressType", &kinds, true, &root, out);
    let kind = str_at(obj, "addressType");
    let endpoints = items(obj, "endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        let count = endpoints.len();
        out.push(Cause::too_many(
            root.child("endpoints"),
            count,
            MAX_ENDPOINTS,
        ));
    }
    for (i, e) in endpoints.iter().enumerate() {
        let ep = root.child("endpoints").index(i);
        let addresses = items(e, "addresses");
        if addresses.is_empty() {
            let msg = "must contain at least 1 address";
            out.push(Cause::required(ep.child("addresses"), msg));
        } else if addresses.len() > MAX_ADDRESSES {
            let count = addresses.len();
            out.push(Cause::too_many(ep.child("addresses"), count, MAX_ADDRESSES));
        }
        for (j, a) in addresses.iter().enumerate() {
            let a = a.as_str().unwrap_or("");
            if kinds.contains(&kind) {
                if let Err(msg) = address_ok(kind, a) {
                    out.push(Cause::invalid(
                        ep.child("addresses").index(j),
                        &json!(a),
                        &msg,
                    ));
                }
            }
        }
        let host = str_at(e, "hostname");
        if !host.is_empty() {
            name_check(names::dns1123_label(host), &ep.child("hostname"), host, out);
        }
    }
    let mut port_names = HashSet::new();
    for (i, p) in items(obj, "ports").iter().enumerate() {
        let pp = root.child("ports").index(i);
        let name = str_at(p, "name");
        if !name.is_empty() {
            name_check(names::dns1123_label(name), &pp.child("name"), name, out);
        }
        if !port_names.insert(name) {
            out.push(Cause::duplicate(pp.child("name"), &json!(name)));
        }
        if let Some(n) = int_field(p, "port", &pp, out) {
            port_range(n, &pp.child("port"), out);
        }
        one_of(p, "protocol", PROTOCOLS, true, &pp, out);
    }
    if let Some(old) = old {
        let new_type = obj.get("addressType").unwrap_or(&Value::Null);
        let old_type = old.get("addressType").unwrap_or(&Value::Null);
        immutable(new_type, old_type, &root.child("addressType"), out);
    }
}

/// Ingress hosts: DNS names, optionally with a leading `*.` wildcard; never IPs.
fn host(h: &str, path: &Path, out: &mut Vec<Cause>) {
    if names::is_ip(h) {
        out.push(Cause::invalid(
            path,
            &json!(h),
            "must be a DNS name, not an IP address",
        ));
        return;
    }
    let rest = h.strip_prefix("*.").unwrap_or(h);
    name_check(names::dns1123_subdomain(rest), path, h, out);
}

fn backend(b: &Value, path: &Path, out: &mut Vec<Cause>) {
    let service = b.get("service").filter(|v| !v.is_null());
    let resource = b.get("resource").filter(|v| !v.is_null());
    match (service, resource) {
        (Some(_), Some(_)) => {
            let msg = "cannot set both resource and service backends";
            out.push(Cause::invalid(path, &json!(""), msg));
        }
        (None, None) => {
            let msg = "resource or service backend is required";
            out.push(Cause::invalid(path, &json!(""), msg));
        }
        (Some(s), None) => service_backend(s, &path.child("service"), out),
        (None, Some(r)) => {
            for key in ["kind", "name"] {
                if str_at(r, key).is_empty() {
                    out.push(Cause::required(path.child("resource").child(key), ""));
                }
            }
        }
    }
}

fn service_backend(s: &Value, path: &Path, out: &mut Vec<Cause>) {
    let name = str_at(s, "name");
    if name.is_empty() {
        out.push(Cause::required(path.child("name"), ""));
    } else {
        name_check(names::dns1035_label(name), &path.child("name"), name, out);
    }
    let port = s.get("port").unwrap_or(&Value::Null);
    let pp = path.child("port");
    let port_name = str_at(port, "name");
    let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
    match (port_name.is_empty(), number) {
        (false, n) if n != 0 => {
            let msg = "cannot set both port name & port number";
            out.push(Cause::invalid(&pp, port, msg));
        }
        (false, _) => name_check(
            names::port_name(port_name),
            &pp.child("name"),
            port_name,
            out,
        ),
        (true, 0) => out.push(Cause::invalid(&pp, port, "port name or number is required")),
        (true, n) => port_range(n, &pp.child("number"), out),
    }
}

pub(crate) fn ingress(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let class = str_at(spec, "ingressClassName");
    if !class.is_empty() {
        let p = path.child("ingressClassName");
        name_check(names::dns1123_subdomain(class), &p, class, out);
    }
    let default_backend = spec.get("defaultBackend").filter(|b| !b.is_null());
    if let Some(b) = default_backend {
        backend(b, &path.child("defaultBackend"), out);
    }
    let rules = items(spec, "rules");
    if rules.is_empty() && default_backend.is_none() {
        let msg = "either `defaultBackend` or `rules` must be specified";
        out.push(Cause::invalid(&path, &json!([]), msg));
    }
    for (i, r) in rules.iter().enumerate() {
        let rp = path.child("rules").index(i);
        let h = str_at(r, "host");
        if !h.is_empty() {
            host(h, &rp.child("host"), out);
        }
        if let Some(http) = r.get("http").filter(|v| !v.is_null()) {
            http_paths(http, &rp.child("http").child("paths"), out);
        }
    }
    for (i, t) in items(spec, "tls").iter().enumerate() {
        let tp = path.child("tls").index(i);
        for (j, h) in items(t, "hosts").iter().enumerate() {
            host(h.as_str().unwrap_or(""), &tp.child("hosts").index(j), out);
        }
    }
}

fn http_paths(http: &Value, path: &Path, out: &mut Vec<Cause>) {
    let paths = items(http, "paths");
    if paths.is_empty() {
        out.push(Cause::required(path, ""));
    }
    for (i, p) in paths.iter().enumerate() {
        let pp = path.index(i);
        let path_type = str_at(p, "pathType");
        let value = str_at(p, "path");
        if path_type.is_empty() {
            out.push(Cause::required(
                pp.child("pathType"),
                "pathType must be specified",
            ));
        } else {
            let types = ["Exact", "ImplementationSpecific", "Prefix"];
            one_of(p, "pathType", &types, true, &pp, out);
        }
        let needs_path = path_type == "Exact" || path_type == "Prefix";
        if (needs_path || !value.is_empty()) && !value.starts_with('/') {
            out.push(Cause::invalid(
                pp.child("path"),
                &json!(value),
                "must be an absolute path",
            ));
        }
        let backend_value = p.get("backend").unwrap_or(&Value::Null);
        backend(backend_value, &pp.child("backend"), out);
    }
}

pub(crate) fn ingress_class(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let controller = str_at(spec, "controller");
    let cp = path.child("controller");
    if controller.is_empty() {
        out.push(Cause::required(&cp, ""));
    } else if controller.len() > 250 {
        out.push(Cause::too_long(&cp, 250));
    } else {
        let domain_ok = controller
            .split_once('/')
            .is_some_and(|(d, rest)| names::dns1123_subdomain(d).is_empty() && !rest.is_empty());
        if !domain_ok {
            let msg = "must be a domain-prefixed path (such as \"acme.io/foo\")";
            out.push(Cause::invalid(&cp, &json!(controller), msg));
        }
    }
    if let Some(params) = spec.get("parameters").filter(|p| !p.is_null()) {
        let pp = path.child("parameters");
        for key in ["kind", "name"] {
            if str_at(params, key).is_empty() {
                out.push(Cause::required(pp.child(key), ""));
            }
        }
        one_of(params, "scope", &["Cluster", "Namespace"], false, &pp, out);
        if str_at(params, "scope") == "Namespace" && str_at(params, "namespace").is_empty() {
            let msg = "`parameters.scope` is set to 'Namespace'";
            out.push(Cause::required(pp.child("namespace"), msg));
        }
    }
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        let old_controller = old_spec.get("controller").unwrap_or(&Value::Null);
        let new_controller = spec.get("controller").unwrap_or(&Value::Null);
        immutable(new_controller, old_controller, &cp, out);
    }
}

/// Upstream's ValidateNetworkPolicySpec. Nothing is immutable, so updates get the same checks.
pub(crate) fn network_policy(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let selector = spec.get("podSelector").unwrap_or(&empty);
    label_selector(selector, &path.child("podSelector"), out);
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(spec, direction).iter().enumerate() {
            let rp = path.child(direction).index(i);
            for (j, port) in items(rule, "ports").iter().enumerate() {
                policy_port(port, &rp.child("ports").index(j), out);
            }
            for (j, peer) in items(rule, peers).iter().enumerate() {
                policy_peer(peer, &rp.child(peers).index(j), out);
            }
        }
    }
    policy_types(spec, &path.child("policyTypes"), out);
}

/// Upstream's ValidateNetworkPolicyPort: a numeric port may open a range up to endPort.
fn policy_port(p: &Value, path: &Path, out: &mut Vec<Cause>) {
    // Upstream lists the protocols in this order in its message.
    one_of(p, "protocol", &["TCP", "UDP", "SCTP"], false, path, out);
    let end = int_field(p, "endPort", path, out);
    let ep = path.child("endPort");
    match p.get("port").filter(|v| !v.is_null()) {
        Some(Value::Number(n)) => {
            let port = n.as_i64().unwrap_or(0);
            port_range(port, &path.child("port"), out);
            if let Some(end) = end {
                if end < port {
                    // Upstream shows the port, not endPort, as the invalid value.
                    let msg = "must be greater than or equal to `port`";
                    out.push(Cause::invalid(&ep, &json!(port), msg));
                }
                port_range(end, &ep, out);
            }
        }
        Some(Value::String(name)) => {
            if let Some(end) = end {
                let msg = "may not be specified when `port` is non-numeric";
                out.push(Cause::invalid(&ep, &json!(end), msg));
            }
            name_check(names::port_name(name), &path.child("port"), name, out);
        }
        Some(other) => {
            let msg = "must be a port number or name";
            out.push(Cause::invalid(path.child("port"), other, msg));
        }
        None => {
            if let Some(end) = end {
                let msg = "may not be specified when `port` is not specified";
                out.push(Cause::invalid(&ep, &json!(end), msg));
            }
        }
    }
}

/// Upstream's ValidateNetworkPolicyPeer: at least one selector or an ipBlock, and an ipBlock
/// alone.
fn policy_peer(peer: &Value, path: &Path, out: &mut Vec<Cause>) {
    let set = |key: &str| peer.get(key).filter(|v| !v.is_null());
    let mut count = 0;
    for key in ["podSelector", "namespaceSelector"] {
        if let Some(sel) = set(key) {
            count += 1;
            label_selector(sel, &path.child(key), out);
        }
    }
    let block = set("ipBlock");
    if let Some(b) = block {
        count += 1;
        ip_block(b, &path.child("ipBlock"), out);
    }
    if count == 0 {
        out.push(Cause::required(path, "must specify a peer"));
    } else if count > 1 && block.is_some() {
        let msg = "may not specify both ipBlock and another peer";
        out.push(Cause::forbidden(path, msg));
    }
}

const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Upstream's ValidateIPBlock: every `except` lies strictly inside `cidr`.
fn ip_block(b: &Value, path: &Path, out: &mut Vec<Cause>) {
    let text = str_at(b, "cidr");
    let cp = path.child("cidr");
    if text.is_empty() {
        out.push(Cause::required(cp, ""));
        return;
    }
    let Some(cidr) = Cidr::parse(text) else {
        out.push(Cause::invalid(cp, &json!(text), CIDR_MESSAGE));
        return;
    };
    for (i, e) in items(b, "except").iter().enumerate() {
        let ep = path.child("except").index(i);
        let e = e.as_str().unwrap_or("");
        match Cidr::parse(e) {
            None => out.push(Cause::invalid(ep, &json!(e), CIDR_MESSAGE)),
            Some(except) if !cidr.strictly_contains(&except) => {
                let msg = "must be a strict subset of `cidr`";
                out.push(Cause::invalid(ep, &json!(e), msg));
            }
            Some(_) => {}
        }
    }
}

/// An address range; IPv4 addresses sit in the low 32 bits, so families never compare equal.
struct Cidr {
    v4: bool,
    network: u128,
    prefix: u32,
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (ip, bits) = text.split_once('/')?;
        let prefix: u32 = bits.parse().ok()?;
        let (v4, addr, width) = match ip.parse::<std::net::IpAddr>().ok()? {
            std::net::IpAddr::V4(a) => (true, u128::from(u32::from(a)), 32),
            std::net::IpAddr::V6(a) => (false, u128::from(a), 128),
        };
        (prefix <= width).then(|| Cidr {
            v4,
            network: addr & Cidr::mask(prefix, width),
            prefix,
        })
    }

    /// Ones in the top `prefix` of `width` bits.
    fn mask(prefix: u32, width: u32) -> u128 {
        let ones = u128::MAX.checked_shl(width - prefix).unwrap_or(0);
        ones & (u128::MAX >> (128 - width))
    }

    /// Go's `cidr.Contains(except.IP) && cidrLen < exceptLen`.
    fn strictly_contains(&self, other: &Cidr) -> bool {
        let width = if self.v4 { 32 } else { 128 };
        self.v4 == other.v4
            && other.prefix > self.prefix
            && other.network & Cidr::mask(self.prefix, width) == self.network
    }
}

/// Upstream's policyTypes check: at most two, each Ingress or Egress (a repeated type is
/// accepted, as upstream accepts it).
fn policy_types(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let types = items(spec, "policyTypes");
    if types.len() > 2 {
        let msg = "may not specify more than two policyTypes";
        out.push(Cause::invalid(path, &spec["policyTypes"], msg));
        return;
    }
    for (i, t) in types.iter().enumerate() {
        if !matches!(t.as_str(), Some("Ingress" | "Egress")) {
            out.push(Cause::not_supported(
                path.index(i),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}
