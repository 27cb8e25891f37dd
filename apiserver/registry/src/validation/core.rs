//! ConfigMap, Secret, Namespace, Node, Event and Lease rules.

use super::field_checks::{at_least, immutable, name_check, non_negative, one_of};
use crate::cause::Cause;
use crate::json::{bool_at, items, map_at, str_at};
use crate::path::Path;
use keelson_apimachinery::base64;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};

/// Upstream's MaxSecretSize, also used for ConfigMaps.
const MAX_DATA_SIZE: usize = 1024 * 1024;

const IMMUTABLE_MSG: &str = "field is immutable when `immutable` is set";

fn data_keys(obj: &Value, key: &str, out: &mut Vec<Cause>) {
    let path = Path::root().child(key);
    for k in map_at(obj, key).into_iter().flatten().map(|(k, _)| k) {
        name_check(names::config_map_key(k), &path.key(k), k, out);
    }
}

/// Once `immutable: true` is stored, neither the data nor the flag may change.
fn immutable_data(obj: &Value, old: Option<&Value>, keys: &[&str], out: &mut Vec<Cause>) {
    let Some(old) = old.filter(|o| bool_at(o, "immutable")) else {
        return;
    };
    if !bool_at(obj, "immutable") {
        out.push(Cause::forbidden("immutable", IMMUTABLE_MSG));
    }
    for key in keys {
        if obj.get(*key) != old.get(*key) {
            out.push(Cause::forbidden(key, IMMUTABLE_MSG));
        }
    }
}

pub(crate) fn config_map(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    data_keys(obj, "data", out);
    data_keys(obj, "binaryData", out);
    let binary = map_at(obj, "binaryData");
    let mut total = 0;
    for (k, v) in map_at(obj, "data").into_iter().flatten() {
        if binary.is_some_and(|b| b.contains_key(k)) {
            let msg = "duplicate of key present in binaryData";
            out.push(Cause::invalid(
                Path::root().child("data").key(k),
                &json!(k),
                msg,
            ));
        }
        total += v.as_str().map_or(0, str::len);
    }
    total += binary
        .into_iter()
        .flatten()
        .map(|(_, v)| v.as_str().map_or(0, str::len) * 3 / 4)
        .sum::<usize>();
    if total > MAX_DATA_SIZE {
        out.push(Cause::too_long("", MAX_DATA_SIZE));
    }
    immutable_data(obj, old, &["data", "binaryData"], out);
}

pub(crate) fn secret(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    data_keys(obj, "data", out);
    let data_path = Path::root().child("data");
    let data = map_at(obj, "data");
    let mut total = 0;
    for (k, v) in data.into_iter().flatten() {
        let s = v.as_str().unwrap_or("");
        if !v.is_string() || !base64::is_valid(s) {
            out.push(Cause::invalid(
                data_path.key(k),
                &json!("<secret>"),
                "illegal base64 data",
            ));
        }
        total += s.len() * 3 / 4;
    }
    if total > MAX_DATA_SIZE {
        out.push(Cause::too_long(&data_path, MAX_DATA_SIZE));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let required: &[&str] = match str_at(obj, "type") {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            &["username", "password"]
        }
        _ => &[],
    };
    for key in required.iter().filter(|k| !has(k)) {
        out.push(Cause::required(data_path.key(key), ""));
    }
    if str_at(obj, "type") == "kubernetes.io/service-account-token" {
        let annotation = "kubernetes.io/service-account.name";
        let set = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(annotation))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if !set {
            let p = Path::root()
                .child("metadata")
                .child("annotations")
                .key(annotation);
            out.push(Cause::required(p, ""));
        }
    }
    if let Some(old) = old {
        let t = |o: &Value| o.get("type").cloned().unwrap_or(Value::Null);
        immutable(&t(obj), &t(old), &Path::root().child("type"), out);
    }
    immutable_data(obj, old, &["data"], out);
}

pub(crate) fn namespace(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec").child("finalizers");
    let empty = json!({});
    for (i, f) in items(obj.get("spec").unwrap_or(&empty), "finalizers")
        .iter()
        .enumerate()
    {
        let f = f.as_str().unwrap_or("");
        name_check(names::qualified_name(f), &path.index(i), f, out);
    }
}

pub(crate) fn node(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    for (i, t) in items(spec, "taints").iter().enumerate() {
        let tp = path.child("taints").index(i);
        let key = str_at(t, "key");
        if key.is_empty() {
            out.push(Cause::required(tp.child("key"), ""));
        } else {
            name_check(names::qualified_name(key), &tp.child("key"), key, out);
        }
        let value = str_at(t, "value");
        name_check(names::label_value(value), &tp.child("value"), value, out);
        let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        one_of(t, "effect", &effects, true, &tp, out);
    }
    pod_cidrs(spec, &path, out);
}

/// The node's pod ranges, which its agent routes: valid CIDRs, one per IP family, and never a
/// default route (prefix length 0 would replace the node's own).
fn pod_cidrs(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    if let Some(cidr) = spec.get("podCIDR").filter(|c| !c.is_null()) {
        pod_cidr(cidr, path.child("podCIDR"), out);
    }
    let listed = items(spec, "podCIDRs").iter().enumerate();
    let families: Vec<bool> = listed
        .filter_map(|(i, c)| pod_cidr(c, path.child("podCIDRs").index(i), out))
        .collect();
    let dual = families.len() == 2 && families.first() != families.last();
    if families.len() > 1 && !dual {
        let msg = "may specify no more than one CIDR for each IP family";
        out.push(Cause::invalid(
            path.child("podCIDRs"),
            &spec["podCIDRs"],
            msg,
        ));
    }
}

/// Checks one pod range; Some(is IPv4) when it is usable.
fn pod_cidr(cidr: &Value, p: Path, out: &mut Vec<Cause>) -> Option<bool> {
    match cidr_of(cidr.as_str().unwrap_or("")) {
        None => {
            let msg = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
            out.push(Cause::invalid(p, cidr, msg));
            None
        }
        Some((_, 0)) => {
            let msg = "must not cover every address (prefix length 0)";
            out.push(Cause::invalid(p, cidr, msg));
            None
        }
        Some((v4, _)) => Some(v4),
    }
}

/// (is IPv4, prefix length) of a CIDR.
fn cidr_of(s: &str) -> Option<(bool, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let (v4, max) = match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => (true, 32),
        std::net::IpAddr::V6(_) => (false, 128),
    };
    let bits: u8 = bits.parse().ok()?;
    (bits <= max).then_some((v4, bits))
}

pub(crate) fn event(obj: &Value, out: &mut Vec<Cause>) {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved = obj
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Events about cluster-scoped objects live in "default" (or nowhere), like upstream.
    let ok = if involved.is_empty() {
        ns.is_empty() || ns == "default"
    } else {
        ns == involved
    };
    if !ok {
        let p = Path::root().child("involvedObject").child("namespace");
        out.push(Cause::invalid(
            p,
            &json!(involved),
            "does not match event.namespace",
        ));
    }
}

pub(crate) fn lease(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let msg = "must be greater than 0";
    at_least(spec, "leaseDurationSeconds", 1, msg, &path, out);
    non_negative(spec, "leaseTransitions", &path, out);
}
