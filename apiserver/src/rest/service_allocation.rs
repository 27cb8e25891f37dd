//! Services' ClusterIPs and NodePorts on write: reserved from the pools before the write,
//! kept when it commits, returned when it fails; what an update or delete frees goes back.

use super::Api;
use crate::allocators::repair::held_keys;
use crate::allocators::{self, AllocError, Held, Owner};
use crate::object::set_path;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::Store;
use keelson_apiserver_registry::Cause;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// Allocations made for a write: kept when it commits, undone when it fails; what the write
/// frees is released once it commits.
#[derive(Default)]
pub struct Reservation {
    owner: Option<Owner>,
    new: Vec<Held>,
    free: Vec<String>,
}

impl Reservation {
    pub async fn commit(self, store: &Store) {
        let Some(owner) = self.owner else { return };
        for key in self.free {
            allocators::release(store, &key, &owner).await;
        }
    }

    pub async fn rollback(self, store: &Store) {
        for held in self.new {
            allocators::undo(store, held).await;
        }
    }

    /// Everything a deleted Service held goes back to the pools.
    pub fn release_all(svc: &Value) -> Reservation {
        Reservation {
            owner: Some(Owner::of(svc)),
            free: held_keys(svc),
            new: Vec::new(),
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

/// What allocating for one Service write needs.
struct Ctx<'a> {
    api: &'a Api,
    owner: Owner,
    dry_run: bool,
}

/// Reserves what a Service needs; `old` is the stored Service on update. A dry run reserves
/// nothing, it only checks.
pub(super) async fn allocate(
    api: &Api,
    res: &Resource,
    old: Option<&Value>,
    obj: &mut Value,
    dry_run: bool,
) -> ApiResult<Reservation> {
    let owner = Owner::of(obj);
    let mut r = Reservation {
        owner: Some(owner.clone()),
        ..Default::default()
    };
    if res.kind != "Service" {
        return Ok(Reservation::default());
    }
    let cx = Ctx {
        api,
        owner,
        dry_run,
    };
    match allocate_service(&cx, old, obj, &mut r).await {
        Ok(()) => Ok(r),
        Err(e) => {
            r.rollback(&api.store).await;
            Err(e)
        }
    }
}

async fn allocate_service(
    cx: &Ctx<'_>,
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
            r.free.push(allocators::ip_key(ip));
        }
        if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    } else {
        allocate_cluster_ip(cx, old, svc, r).await?;
    }
    allocate_node_ports(cx, old, svc, &svc_type, r).await
}

/// A failure to store an allocation (not the user's fault): 503 while the storage is away.
fn store_failure(e: AllocError) -> ApiError {
    match e {
        AllocError::Store(crate::store::StoreError::Unavailable(why)) => ApiError::unavailable(why),
        e => ApiError::internal(format!("allocating for the Service: {e}")),
    }
}

/// Keeps the ClusterIP a Service has (it is immutable), or allocates the one asked for, or any.
async fn allocate_cluster_ip(
    cx: &Ctx<'_>,
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
    let a = &cx.api.alloc;
    let (ip, held) = match a
        .allocate_ip(&cx.api.store, want, &cx.owner, cx.dry_run)
        .await
    {
        Ok(got) => got,
        Err(e @ AllocError::Store(_)) => return Err(store_failure(e)),
        Err(e) => {
            let msg = format!("Invalid value: [\"{asked}\"]: failed to allocate IP {asked}: {e}");
            return Err(invalid(svc, "spec.clusterIPs", msg));
        }
    };
    r.new.extend(held);
    set_cluster_ips(svc, &ip.to_string());
    Ok(())
}

fn set_cluster_ips(svc: &mut Value, ip: &str) {
    set_path(svc, &["spec", "clusterIP"], json!(ip));
    set_path(svc, &["spec", "clusterIPs"], json!([ip]));
}

async fn allocate_node_ports(
    cx: &Ctx<'_>,
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
        r.free.extend(held.into_iter().map(allocators::port_key));
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
                let a = &cx.api.alloc;
                let got = a.allocate_port(&cx.api.store, given, &cx.owner, cx.dry_run);
                let (port, h) = match got.await {
                    Ok(got) => got,
                    Err(e @ AllocError::Store(_)) => return Err(store_failure(e)),
                    Err(e) => {
                        let cause = Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!("Invalid value: {}: {e}", given.unwrap_or(0)),
                            field: format!("spec.ports[{i}].nodePort"),
                        };
                        return Err(ApiError::invalid("Service", "", &name, &[cause]));
                    }
                };
                r.new.extend(h);
                port
            }
        };
        kept.insert(port);
        set_path(p, &["nodePort"], json!(port));
    }
    let freed = held.difference(&kept).copied().map(allocators::port_key);
    r.free.extend(freed);
    Ok(())
}
