//! The load-balancer IP allocator's decisions, pure: from every Service, which address each
//! LoadBalancer Service shows in status.loadBalancer, and which get a warning Event. The used
//! addresses are rebuilt from the Services on every plan, as node IPAM's blocks are: a restart or
//! a deleted Service needs no bookkeeping, what no Service holds is free.

use super::pool::Pool;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Event reasons, MetalLB's.
pub const ALLOCATION_FAILED: &str = "AllocationFailed";
pub const IP_ALLOCATED: &str = "IPAllocated";

/// What a Service asks of this allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wants {
    /// type LoadBalancer, no spec.loadBalancerClass, IPv4 allowed: an address from the pool.
    Address,
    /// Any other type: a status.loadBalancer left from when it was a LoadBalancer is cleared.
    Nothing,
    /// spec.loadBalancerClass set (another implementation's), or an IPv6-only LoadBalancer:
    /// never touched.
    NotOurs,
}

/// What the allocator reads of a Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    /// Oldest first wins a conflict.
    pub created: Option<Timestamp>,
    pub wants: Wants,
    /// spec.loadBalancerIP (deprecated upstream, still honoured as MetalLB does).
    pub requested: Option<String>,
    /// status.loadBalancer.ingress[].ip (the hostname for an entry without one).
    pub current: Vec<String>,
}

impl ServiceView {
    pub fn from_service(svc: &Service) -> ServiceView {
        let spec = svc.spec.clone().unwrap_or_default();
        let ipv4 = spec
            .ip_families
            .as_ref()
            .is_none_or(|f| f.is_empty() || f.iter().any(|f| f == "IPv4"));
        let wants = match (spec.type_.as_deref(), &spec.load_balancer_class) {
            (_, Some(_)) => Wants::NotOurs,
            (Some("LoadBalancer"), None) if ipv4 => Wants::Address,
            (Some("LoadBalancer"), None) => Wants::NotOurs,
            _ => Wants::Nothing,
        };
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        let current = ingress
            .into_iter()
            .flatten()
            .map(|i| i.ip.clone().or(i.hostname.clone()).unwrap_or_default())
            .collect();
        ServiceView {
            namespace: svc.namespace().unwrap_or_default(),
            name: svc.name_any(),
            resource_version: svc.resource_version().unwrap_or_default(),
            created: svc.metadata.creation_timestamp.as_ref().map(|t| t.0),
            wants,
            requested: spec.load_balancer_ip.filter(|ip| !ip.is_empty()),
            current,
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write status.loadBalancer.ingress (at the resourceVersion seen); empty `ips` clears it.
    Set {
        namespace: String,
        name: String,
        resource_version: String,
        ips: Vec<Ipv4Addr>,
        /// The Normal IPAllocated Event's message when addresses are assigned.
        event: Option<String>,
    },
    /// A warning Event on the Service.
    Warn {
        namespace: String,
        name: String,
        reason: &'static str,
        message: String,
    },
}

/// A plan's actions, and how many pool addresses are held once they are carried out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub in_use: usize,
}

/// The addresses taken during one plan.
#[derive(Default)]
struct Taken<'a> {
    /// Kept by, or given to, a Service that wants an address.
    held: BTreeMap<Ipv4Addr, &'a ServiceView>,
    /// Still shown by a Service about to lose it: handed out only once its status no longer
    /// shows it (the next plan), so two Services never show one address at once.
    releasing: BTreeMap<Ipv4Addr, &'a ServiceView>,
}

impl<'a> Taken<'a> {
    /// Who keeps `ip` from `s`, if anyone (an address `s` itself is releasing is its to take).
    fn holder(&self, ip: Ipv4Addr, s: &ServiceView) -> Option<&'a ServiceView> {
        let releasing = self.releasing.get(&ip).filter(|r| r.key() != s.key());
        self.held.get(&ip).or(releasing).copied()
    }

    fn give(&mut self, ip: Ipv4Addr, s: &'a ServiceView) {
        self.releasing.remove(&ip);
        self.held.insert(ip, s);
    }

    fn count(&self) -> usize {
        self.held.len() + self.releasing.len()
    }
}

pub fn plan(pool: &Pool, services: &[ServiceView]) -> Plan {
    let mut wanting: Vec<&ServiceView> = services
        .iter()
        .filter(|s| s.wants == Wants::Address)
        .collect();
    wanting.sort_by(|a, b| {
        (a.created, &a.namespace, &a.name).cmp(&(b.created, &b.namespace, &b.name))
    });
    let mut taken = Taken::default();
    let mut unplaced = Vec::new();
    for s in wanting {
        match keepable(pool, s) {
            Some(ip) if !taken.held.contains_key(&ip) => taken.give(ip, s),
            _ => unplaced.push(s),
        }
    }
    let losing = services.iter().filter(|s| s.wants == Wants::Nothing);
    for s in unplaced.iter().copied().chain(losing.clone()) {
        for ip in s.current.iter().filter_map(|c| c.parse::<Ipv4Addr>().ok()) {
            if pool.contains(ip) && !taken.held.contains_key(&ip) {
                taken.releasing.entry(ip).or_insert(s);
            }
        }
    }
    let mut actions = Vec::new();
    for s in unplaced {
        match choose(pool, s, &taken) {
            Ok(ip) => {
                taken.give(ip, s);
                actions.extend(set(s, vec![ip]));
            }
            Err(message) => {
                actions.extend(set(s, Vec::new()));
                actions.push(Action::Warn {
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    reason: ALLOCATION_FAILED,
                    message,
                });
            }
        }
    }
    for s in losing {
        actions.extend(set(s, Vec::new()));
    }
    Plan {
        actions,
        in_use: taken.held.len(),
    }
}

/// The Service's current address, when it may keep it: one IPv4 address, in the pool, and the
/// one it asks for if it asks.
fn keepable(pool: &Pool, s: &ServiceView) -> Option<Ipv4Addr> {
    let [current] = s.current.as_slice() else {
        return None;
    };
    let ip: Ipv4Addr = current.parse().ok()?;
    let asked = s
        .requested
        .as_ref()
        .is_none_or(|r| r.parse::<Ipv4Addr>().ok() == Some(ip));
    (pool.contains(ip) && asked).then_some(ip)
}

/// The address a Service gets: the one it asks for, else the lowest free one; or why none.
fn choose(pool: &Pool, s: &ServiceView, taken: &Taken) -> Result<Ipv4Addr, String> {
    let Some(requested) = &s.requested else {
        return pool
            .iter()
            .find(|ip| taken.holder(*ip, s).is_none())
            .ok_or_else(|| {
                let n = taken.count();
                format!("no address left in the pool {pool} ({n} in use)")
            });
    };
    let Ok(ip) = requested.parse::<Ipv4Addr>() else {
        return Err(format!(
            "spec.loadBalancerIP {requested:?} is not an IPv4 address"
        ));
    };
    if !pool.contains(ip) {
        return Err(format!(
            "spec.loadBalancerIP {ip} is not in the pool {pool}"
        ));
    }
    match taken.holder(ip, s) {
        Some(holder) => Err(format!(
            "spec.loadBalancerIP {ip} is used by Service {}",
            holder.key()
        )),
        None => Ok(ip),
    }
}

/// A write of `ips` to the Service's status, unless it already shows them.
fn set(s: &ServiceView, ips: Vec<Ipv4Addr>) -> Option<Action> {
    let shown: Vec<String> = ips.iter().map(Ipv4Addr::to_string).collect();
    if shown == s.current {
        return None;
    }
    let event = (!ips.is_empty()).then(|| assigned_message(&ips));
    Some(Action::Set {
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        resource_version: s.resource_version.clone(),
        ips,
        event,
    })
}

/// MetalLB's wording (Go's %q of the list).
fn assigned_message(ips: &[Ipv4Addr]) -> String {
    let quoted: Vec<String> = ips.iter().map(|ip| format!("\"{ip}\"")).collect();
    format!("Assigned IP [{}]", quoted.join(" "))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
