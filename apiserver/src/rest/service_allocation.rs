//! Services' ClusterIPs and NodePorts on write: reserved from the pools before the write,
//! kept when it commits, returned when it fails; what an update or delete frees goes back.

use super::Api;
use crate::allocators::Allocators;
use crate::object::set_path;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// Allocations made for a write: kept when it commits, returned when it fails.
#[derive(Default)]
pub struct Reservation {
    new_ips: Vec<Ipv4Addr>,
    new_ports: Vec<u16>,
    free_ips: Vec<Ipv4Addr>,
    free_ports: Vec<u16>,
}

impl Reservation {
    pub fn commit(self, a: &Allocators) {
        self.free_ips.into_iter().for_each(|ip| a.release_ip(ip));
        self.free_ports.into_iter().for_each(|p| a.release_port(p));
    }

    pub fn rollback(self, a: &Allocators) {
        self.new_ips.into_iter().for_each(|ip| a.release_ip(ip));
        self.new_ports.into_iter().for_each(|p| a.release_port(p));
    }

    /// Everything a deleted Service held goes back to the pools.
    pub fn release_all(svc: &Value) -> Reservation {
        Reservation {
            free_ips: cluster_ip(svc).into_iter().collect(),
            free_ports: node_ports(svc).into_iter().collect(),
            ..Default::default()
        }
    }
}

fn cluster_ip(svc: &Value) -> Option<Ipv4Addr> {
    svc.pointer("/spec/clusterIP")?.as_str()?.parse().ok()
}

fn node_ports(svc: &Value) -> HashSet<u16> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p.get("nodePort")?.as_u64())
                .filter_map(|p| u16::try_from(p).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn invalid(svc: &Value, field: &str, message: String) -> ApiError {
    let cause = Cause {
        reason: "FieldValueInvalid".into(),
        message,
        field: field.into(),
    };
    ApiError::invalid("Service", "", crate::object::name(svc), &[cause])
}

/// Reserves what a Service needs; `old` is the stored Service on update.
pub(super) fn allocate(
    api: &Api,
    res: &Resource,
    old: Option<&Value>,
    obj: &mut Value,
) -> ApiResult<Reservation> {
    let mut r = Reservation::default();
    if res.kind != "Service" {
        return Ok(r);
    }
    match allocate_service(&api.alloc, old, obj, &mut r) {
        Ok(()) => Ok(r),
        Err(e) => {
            r.rollback(&api.alloc);
            Err(e)
        }
    }
}

fn allocate_service(
    a: &Allocators,
    old: Option<&Value>,
    svc: &mut Value,
    r: &mut Reservation,
) -> ApiResult<()> {
    let svc_type = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if svc_type == "ExternalName" {
        if let Some(ip) = old.and_then(cluster_ip) {
            r.free_ips.push(ip);
        }
        if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    } else {
        allocate_cluster_ip(a, old, svc, r)?;
    }
    allocate_node_ports(a, old, svc, &svc_type, r)
}

/// Keeps the ClusterIP a Service has (it is immutable), or allocates the one asked for, or any.
fn allocate_cluster_ip(
    a: &Allocators,
    old: Option<&Value>,
    svc: &mut Value,
    r: &mut Reservation,
) -> ApiResult<()> {
    let old_ip = old
        .and_then(|o| o.pointer("/spec/clusterIP")?.as_str())
        .unwrap_or("")
        .to_string();
    let asked = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !old_ip.is_empty() {
        if !asked.is_empty() && asked != old_ip {
            let msg = format!("Invalid value: \"{asked}\": field is immutable");
            return Err(invalid(svc, "spec.clusterIP", msg));
        }
        set_cluster_ips(svc, &old_ip);
        return Ok(());
    }
    if asked == "None" {
        set_path(svc, &["spec", "clusterIPs"], json!(["None"]));
        return Ok(());
    }
    let want = if asked.is_empty() {
        None
    } else {
        Some(asked.parse::<Ipv4Addr>().map_err(|_| {
            invalid(svc, "spec.clusterIP", format!("Invalid value: \"{asked}\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        })?)
    };
    let ip = a.allocate_ip(want).map_err(|e| {
        let msg = format!("Invalid value: [\"{asked}\"]: failed to allocate IP {asked}: {e}");
        invalid(svc, "spec.clusterIPs", msg)
    })?;
    r.new_ips.push(ip);
    set_cluster_ips(svc, &ip.to_string());
    Ok(())
}

fn set_cluster_ips(svc: &mut Value, ip: &str) {
    set_path(svc, &["spec", "clusterIP"], json!(ip));
    set_path(svc, &["spec", "clusterIPs"], json!([ip]));
}

fn allocate_node_ports(
    a: &Allocators,
    old: Option<&Value>,
    svc: &mut Value,
    svc_type: &str,
    r: &mut Reservation,
) -> ApiResult<()> {
    let held = old.map(node_ports).unwrap_or_default();
    let wants_ports = svc_type == "NodePort" || svc_type == "LoadBalancer";
    let old_ports = old
        .and_then(|o| o.pointer("/spec/ports")?.as_array())
        .map_or(&[][..], Vec::as_slice);
    let mut kept = HashSet::new();
    let name = crate::object::name(svc).to_string();
    let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
        r.free_ports.extend(held);
        return Ok(());
    };
    for (i, p) in ports.iter_mut().enumerate() {
        if !wants_ports {
            if let Some(m) = p.as_object_mut() {
                m.remove("nodePort");
            }
            continue;
        }
        let given = p
            .get("nodePort")
            .and_then(Value::as_i64)
            .filter(|n| *n != 0);
        // An update that leaves nodePort out keeps the one this port already had.
        let reuse = given.or_else(|| {
            old_ports
                .iter()
                .find(|o| o.get("port") == p.get("port") && o.get("protocol") == p.get("protocol"))
                .and_then(|o| o.get("nodePort")?.as_i64())
        });
        let reused = reuse
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0 && held.contains(n));
        let port = match reused {
            Some(n) => n,
            None => {
                let got = a.allocate_port(given).map_err(|e| {
                    let field = format!("spec.ports[{i}].nodePort");
                    let cause = Cause {
                        reason: "FieldValueInvalid".into(),
                        message: format!("Invalid value: {}: {e}", given.unwrap_or(0)),
                        field,
                    };
                    ApiError::invalid("Service", "", &name, &[cause])
                })?;
                r.new_ports.push(got);
                got
            }
        };
        kept.insert(port);
        set_path(p, &["nodePort"], json!(port));
    }
    r.free_ports.extend(held.difference(&kept).copied());
    Ok(())
}

/// Marks the allocations of every stored Service as taken; run once at start.
pub fn rebuild_allocations(api: &Api) {
    let Some(svc) = crate::resources::lookup("", "v1", "services") else {
        return;
    };
    let (items, _) = api.store.list(&svc.key_prefix());
    for e in items {
        if let Some(ip) = cluster_ip(&e.obj) {
            let _ = api.alloc.allocate_ip(Some(ip));
        }
        for p in node_ports(&e.obj) {
            let _ = api.alloc.allocate_port(Some(i64::from(p)));
        }
    }
}
