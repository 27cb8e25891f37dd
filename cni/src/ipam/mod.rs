//! Built-in address management (host-local's keys and on-disk format), used by the bridge
//! plugin directly and by the same binary when run as the `keelson-ipam` plugin.

pub mod allocator;
pub mod config;
pub mod disk;
pub mod plugin;
pub mod range;
pub mod store;

use std::collections::HashSet;
use std::net::IpAddr;

use crate::error::{code, CniError, Result};
use crate::result::{CniResult, IpConfig};
use allocator::Allocated;
use config::IpamPlan;
use disk::DiskStore;
use store::Owner;

fn open(plan: &IpamPlan) -> Result<DiskStore> {
    DiskStore::open(&plan.dir).map_err(|e| {
        CniError::io(
            format!("cannot open IPAM data directory {}", plan.dir.display()),
            &e,
        )
    })
}

pub fn allocate(plan: &IpamPlan, owner: &Owner) -> Result<Vec<Allocated>> {
    let mut store = open(plan)?;
    allocator::allocate(&mut store, &plan.range_sets, owner)
}

pub fn release(plan: &IpamPlan, owner: &Owner, hints: &[IpAddr]) -> Result<Vec<IpAddr>> {
    let mut store = open(plan)?;
    allocator::release(&mut store, owner, hints)
}

pub fn gc(plan: &IpamPlan, valid: &HashSet<Owner>) -> Result<Vec<IpAddr>> {
    let mut store = open(plan)?;
    allocator::gc(&mut store, valid)
}

/// The IPAM part of CHECK: each address is still recorded for this owner.
pub fn check(plan: &IpamPlan, owner: &Owner, ips: &[IpAddr]) -> Result<()> {
    use store::Store;
    let store = open(plan)?;
    for ip in ips {
        let held = store
            .owner_of(*ip)
            .map_err(|e| CniError::io(format!("reading allocation of {ip}"), &e))?;
        if !held.is_some_and(|o| o.matches(owner)) {
            return Err(CniError::new(
                code::CHECK_FAILED,
                format!(
                    "IPAM: {ip} is not allocated to {} {}",
                    owner.id, owner.ifname
                ),
                format!("no matching allocation file under {}", plan.dir.display()),
            ));
        }
    }
    Ok(())
}

/// STATUS: the data directory is usable and every range set has a free address.
pub fn status(plan: &IpamPlan) -> Result<()> {
    let store = open(plan).map_err(|e| CniError::new(code::NOT_AVAILABLE, e.msg, e.details))?;
    let free = allocator::free_per_set(&store, &plan.range_sets)?;
    if let Some(i) = free.iter().position(|f| *f == 0) {
        return Err(CniError::new(
            code::NOT_AVAILABLE,
            format!("IPAM range set {i} has no free address"),
            "release unused attachments or run GC",
        ));
    }
    Ok(())
}

/// The result an IPAM plugin returns: addresses (no interface index) and the configured routes.
pub fn to_result(plan: &IpamPlan, allocated: &[Allocated]) -> CniResult {
    CniResult {
        ips: allocated
            .iter()
            .map(|a| IpConfig {
                interface: None,
                address: a.range.with_prefix(a.ip),
                gateway: Some(a.range.gateway),
                version: None,
            })
            .collect(),
        routes: plan.routes.clone(),
        ..Default::default()
    }
}
