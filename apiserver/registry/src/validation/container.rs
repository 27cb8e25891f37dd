//! Container rules (validateContainers, validateInitContainers, probes, resources).

use super::field_checks::{int_field, name_check, non_negative, one_of, PROTOCOLS};
use super::lifecycle::{handler, lifecycle, PROBE_HANDLERS};
use crate::cause::Cause;
use crate::json::{items, map_at, str_at};
use crate::path::Path;
use crate::quantity;
use keelson_apimachinery::validation as names;
use serde_json::{json, Value};
use std::collections::HashSet;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Role {
    Regular,
    Init,
    /// Probes, lifecycle, ports, resources and restartPolicy are refused by the ephemeral
    /// allow-list instead (validateContainerCommon checks none of them more).
    Ephemeral,
}

/// What a container's rules need to know of its pod.
pub(crate) struct PodFacts<'a> {
    pub volumes: &'a HashSet<String>,
    pub host_network: bool,
    /// terminationGracePeriodSeconds (defaulted before validation).
    pub grace_period: i64,
}

const QUANTITY_MSG: &str = "must match the regex ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

pub(crate) fn container(
    c: &Value,
    path: &Path,
    role: Role,
    pod: &PodFacts,
    seen: &mut HashSet<String>,
    out: &mut Vec<Cause>,
) {
    let name = str_at(c, "name");
    if name.is_empty() {
        out.push(Cause::required(path.child("name"), ""));
    } else {
        name_check(names::dns1123_label(name), &path.child("name"), name, out);
        if !seen.insert(name.to_string()) {
            out.push(Cause::duplicate(path.child("name"), &json!(name)));
        }
    }
    let image = str_at(c, "image");
    if image.is_empty() {
        out.push(Cause::required(path.child("image"), ""));
    } else if image.trim() != image {
        let msg = "must not have leading or trailing whitespace";
        out.push(Cause::invalid(path.child("image"), &json!(image), msg));
    }
    one_of(
        c,
        "imagePullPolicy",
        &["Always", "IfNotPresent", "Never"],
        true,
        path,
        out,
    );
    let policies = ["File", "FallbackToLogsOnError"];
    one_of(c, "terminationMessagePolicy", &policies, true, path, out);
    ports(c, &path.child("ports"), pod.host_network, out);
    env(c, &path.child("env"), out);
    volume_mounts(c, &path.child("volumeMounts"), pod.volumes, out);
    resources(c, &path.child("resources"), out);
    if role == Role::Ephemeral {
        return;
    }
    let sidecar = role == Role::Init && str_at(c, "restartPolicy") == "Always";
    match role {
        Role::Init => one_of(c, "restartPolicy", &["Always"], false, path, out),
        Role::Regular if !str_at(c, "restartPolicy").is_empty() => out.push(Cause::forbidden(
            path.child("restartPolicy"),
            "may not be set for non-init containers",
        )),
        Role::Regular | Role::Ephemeral => {}
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(probe_value) = c.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        if role == Role::Init && !sidecar {
            let msg = "may not be set for init containers without restartPolicy=Always";
            out.push(Cause::forbidden(path.child(key), msg));
        } else {
            probe(probe_value, key != "readinessProbe", &path.child(key), out);
        }
    }
    if let Some(l) = c.get("lifecycle").filter(|v| !v.is_null()) {
        if role == Role::Init && !sidecar {
            let msg = "may not be set for init containers without restartPolicy=Always";
            out.push(Cause::forbidden(path.child("lifecycle"), msg));
        } else {
            lifecycle(l, pod.grace_period, &path.child("lifecycle"), out);
        }
    }
}

fn ports(c: &Value, path: &Path, host_network: bool, out: &mut Vec<Cause>) {
    let mut port_names = HashSet::new();
    for (i, p) in items(c, "ports").iter().enumerate() {
        let pp = path.index(i);
        let name = str_at(p, "name");
        if !name.is_empty() {
            name_check(names::port_name(name), &pp.child("name"), name, out);
            if !port_names.insert(name) {
                out.push(Cause::duplicate(pp.child("name"), &json!(name)));
            }
        }
        let container_port = int_field(p, "containerPort", &pp, out);
        match container_port {
            None | Some(0) => out.push(Cause::required(pp.child("containerPort"), "")),
            Some(n) => port_range(n, &pp.child("containerPort"), out),
        }
        let host_port = int_field(p, "hostPort", &pp, out).unwrap_or(0);
        if host_port != 0 {
            port_range(host_port, &pp.child("hostPort"), out);
        }
        if host_network && host_port != 0 && Some(host_port) != container_port {
            let msg = "must match `containerPort` when `hostNetwork` is true";
            out.push(Cause::invalid(pp.child("hostPort"), &json!(host_port), msg));
        }
        one_of(p, "protocol", PROTOCOLS, true, &pp, out);
    }
}

pub(crate) fn port_range(n: i64, path: &Path, out: &mut Vec<Cause>) {
    for msg in names::port_number(n) {
        out.push(Cause::invalid(path, &json!(n), &msg));
    }
}

fn env(c: &Value, path: &Path, out: &mut Vec<Cause>) {
    for (i, e) in items(c, "env").iter().enumerate() {
        let p = path.index(i);
        let name = str_at(e, "name");
        if name.is_empty() {
            out.push(Cause::required(p.child("name"), ""));
        } else {
            name_check(names::env_var_name(name), &p.child("name"), name, out);
        }
        if !str_at(e, "value").is_empty() && e.get("valueFrom").is_some_and(|v| !v.is_null()) {
            let msg = "may not be specified when `value` is not empty";
            out.push(Cause::invalid(p.child("valueFrom"), &json!(""), msg));
        }
    }
}

fn volume_mounts(c: &Value, path: &Path, volumes: &HashSet<String>, out: &mut Vec<Cause>) {
    let mut mount_paths = HashSet::new();
    for (i, m) in items(c, "volumeMounts").iter().enumerate() {
        let p = path.index(i);
        let name = str_at(m, "name");
        if name.is_empty() {
            out.push(Cause::required(p.child("name"), ""));
        } else if !volumes.contains(name) {
            out.push(Cause::not_found(p.child("name"), &json!(name)));
        }
        let mount_path = str_at(m, "mountPath");
        if mount_path.is_empty() {
            out.push(Cause::required(p.child("mountPath"), ""));
        } else if !mount_paths.insert(mount_path) {
            out.push(Cause::invalid(
                p.child("mountPath"),
                &json!(mount_path),
                "must be unique",
            ));
        }
        sub_paths(m, &p, out);
    }
}

/// subPath and subPathExpr stay inside their volume (the agent mounts what they name).
fn sub_paths(m: &Value, p: &Path, out: &mut Vec<Cause>) {
    for key in ["subPath", "subPathExpr"] {
        let sub = str_at(m, key);
        for msg in names::local_descending_path(sub) {
            out.push(Cause::invalid(p.child(key), &json!(sub), &msg));
        }
    }
    let expr = str_at(m, "subPathExpr");
    if !str_at(m, "subPath").is_empty() && !expr.is_empty() {
        let msg = "subPathExpr and subPath are mutually exclusive";
        out.push(Cause::invalid(p.child("subPathExpr"), &json!(expr), msg));
    }
}

fn resources(c: &Value, path: &Path, out: &mut Vec<Cause>) {
    let Some(res) = c.get("resources") else {
        return;
    };
    for kind in ["limits", "requests"] {
        for (name, q) in map_at(res, kind).into_iter().flatten() {
            let p = path.child(kind).key(name);
            match quantity::parse_value(q) {
                None => out.push(Cause::invalid(&p, q, QUANTITY_MSG)),
                Some(v) if v < 0.0 => {
                    out.push(Cause::invalid(&p, q, "must be greater than or equal to 0"))
                }
                Some(_) => {}
            }
        }
    }
    let limits = map_at(res, "limits");
    for (name, q) in map_at(res, "requests").into_iter().flatten() {
        let Some(limit) = limits.and_then(|l| l.get(name)) else {
            continue;
        };
        if let (Some(r), Some(l)) = (quantity::parse_value(q), quantity::parse_value(limit)) {
            if r > l {
                let shown = limit
                    .as_str()
                    .map_or_else(|| limit.to_string(), str::to_string);
                let msg = format!("must be less than or equal to {name} limit of {shown}");
                out.push(Cause::invalid(path.child("requests").key(name), q, &msg));
            }
        }
    }
}

fn probe(p: &Value, success_must_be_one: bool, path: &Path, out: &mut Vec<Cause>) {
    handler(p, PROBE_HANDLERS, path, out);
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        non_negative(p, key, path, out);
    }
    if success_must_be_one {
        if let Some(n) = p.get("successThreshold").and_then(Value::as_i64) {
            if n != 1 {
                out.push(Cause::invalid(
                    path.child("successThreshold"),
                    &json!(n),
                    "must be 1",
                ));
            }
        }
    }
}
