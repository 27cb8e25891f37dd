//! The ClusterIP and NodePort pools, kept in the store so that several API servers on one etcd
//! never hand out one address or port twice: each allocation is an object of its own (as
//! upstream's IPAddress objects since 1.33), created only if absent, naming the Service that
//! holds it. Creating the record is the allocation; deleting it is the release. A repair pass
//! (`repair.rs`) records what Services hold and frees what none holds.

mod records;
pub mod repair;

pub use records::{check_record, ip_key, port_key, Owner, IP_PREFIX, PORT_PREFIX};

use crate::store::{Precondition, Rev, Store, StoreError, Write};
use ipnetwork::Ipv4Network;
use rand::Rng;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AllocError {
    #[error("provided IP {0} is not in the valid range. The range of valid IPs is {1}")]
    IpOutOfRange(Ipv4Addr, Ipv4Network),
    #[error("provided IP {0} is already allocated")]
    IpTaken(Ipv4Addr),
    #[error("no IP addresses left in the service range {0}")]
    IpExhausted(Ipv4Network),
    #[error("provided port {0} is not in the valid range. The range of valid ports is {1}-{2}")]
    PortOutOfRange(i64, u16, u16),
    #[error("provided port {0} is already allocated")]
    PortTaken(u16),
    #[error("no node ports left in the range {0}-{1}")]
    PortsExhausted(u16, u16),
    #[error("storing the allocation: {0}")]
    Store(StoreError),
}

/// An allocation this server made: what undoing it deletes, if nobody changed it since.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub key: String,
    pub rev: Rev,
}

pub struct Allocators {
    net: Ipv4Network,
    ports: RangeInclusive<u16>,
}

impl Allocators {
    pub fn new(net: Ipv4Network, ports: RangeInclusive<u16>) -> Allocators {
        Allocators { net, ports }
    }

    pub fn range(&self) -> Ipv4Network {
        self.net
    }

    pub fn port_range(&self) -> RangeInclusive<u16> {
        self.ports.clone()
    }

    fn first_last(&self) -> (u32, u32) {
        // The network address and broadcast are never handed out.
        let first = u32::from(self.net.network()) + 1;
        let last = u32::from(self.net.broadcast()).saturating_sub(1);
        (first, last.max(first))
    }

    /// Allocates `want`, or a random free address when None, for `owner`. A dry run only
    /// checks (against what this server has seen) and stores nothing.
    pub async fn allocate_ip(
        &self,
        store: &Store,
        want: Option<Ipv4Addr>,
        owner: &Owner,
        dry_run: bool,
    ) -> Result<(Ipv4Addr, Option<Held>), AllocError> {
        let (first, last) = self.first_last();
        let ip_key = |n: u32| records::ip_key(Ipv4Addr::from(n));
        if let Some(ip) = want {
            let n = u32::from(ip);
            if !self.net.contains(ip) || n < first || n > last {
                return Err(AllocError::IpOutOfRange(ip, self.net));
            }
            return match claim(store, &ip_key(n), &ip.to_string(), owner, dry_run).await? {
                Some(held) => Ok((ip, held)),
                None => Err(AllocError::IpTaken(ip)),
            };
        }
        let found = search_synced(store, first, last, &ip_key, owner, dry_run).await?;
        let (n, held) = found.ok_or(AllocError::IpExhausted(self.net))?;
        Ok((Ipv4Addr::from(n), held))
    }

    /// `allocate_ip` for a NodePort.
    pub async fn allocate_port(
        &self,
        store: &Store,
        want: Option<i64>,
        owner: &Owner,
        dry_run: bool,
    ) -> Result<(u16, Option<Held>), AllocError> {
        let (lo, hi) = (*self.ports.start(), *self.ports.end());
        let port_key = |n: u32| records::port_key(n as u16);
        if let Some(p) = want {
            if p < i64::from(lo) || p > i64::from(hi) {
                return Err(AllocError::PortOutOfRange(p, lo, hi));
            }
            let p = p as u16;
            let key = port_key(u32::from(p));
            return match claim(store, &key, &p.to_string(), owner, dry_run).await? {
                Some(held) => Ok((p, held)),
                None => Err(AllocError::PortTaken(p)),
            };
        }
        let found = search_synced(store, lo.into(), hi.into(), &port_key, owner, dry_run).await?;
        let (n, held) = found.ok_or(AllocError::PortsExhausted(lo, hi))?;
        Ok((n as u16, held))
    }
}

/// `search`; when this server saw the pool full, once more after catching up with the store
/// (another server may have freed one a moment ago).
async fn search_synced(
    store: &Store,
    first: u32,
    last: u32,
    key_of: &(dyn Fn(u32) -> String + Sync),
    owner: &Owner,
    dry_run: bool,
) -> Result<Option<(u32, Option<Held>)>, AllocError> {
    let found = search(store, first, last, key_of, owner, dry_run).await?;
    if found.is_some() {
        return Ok(found);
    }
    store.sync().await.map_err(AllocError::Store)?;
    search(store, first, last, key_of, owner, dry_run).await
}

/// Walks `first..=last` from a random start and claims the first member free: skips those this
/// server has seen taken, and moves on when another server took one first.
async fn search(
    store: &Store,
    first: u32,
    last: u32,
    key_of: &(dyn Fn(u32) -> String + Sync),
    owner: &Owner,
    dry_run: bool,
) -> Result<Option<(u32, Option<Held>)>, AllocError> {
    let size = u64::from(last - first) + 1;
    let start = rand::rng().random_range(0..size);
    for i in 0..size {
        let n = first + ((start + i) % size) as u32;
        let key = key_of(n);
        if store.get(&key).is_some() {
            continue;
        }
        let name = key.rsplit('/').next().unwrap_or_default().to_string();
        if let Some(held) = claim(store, &key, &name, owner, dry_run).await? {
            return Ok(Some((n, held)));
        }
    }
    Ok(None)
}

/// Creates the record at `key` for `owner`: Some when it is now ours (None inside for a dry
/// run), None when it was taken.
async fn claim(
    store: &Store,
    key: &str,
    name: &str,
    owner: &Owner,
    dry_run: bool,
) -> Result<Option<Option<Held>>, AllocError> {
    if dry_run {
        return Ok(store.get(key).is_none().then_some(None));
    }
    let w = Write {
        key: key.to_string(),
        value: Some(records::record(key, name, owner)),
        precondition: Precondition::MustNotExist,
    };
    match store.write(w).await {
        Ok(e) => Ok(Some(Some(Held {
            key: key.to_string(),
            rev: e.rev,
        }))),
        Err(StoreError::AlreadyExists) => Ok(None),
        Err(e) => Err(AllocError::Store(e)),
    }
}

/// Undoes an allocation of a write that failed: deletes the record unless it changed since.
pub async fn undo(store: &Store, held: Held) {
    let w = Write {
        key: held.key.clone(),
        value: None,
        precondition: Precondition::Rev(held.rev),
    };
    match store.write(w).await {
        Ok(_) | Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
        Err(e) => {
            tracing::warn!(key = held.key, error = %e, "undoing an allocation failed; the repair pass frees it")
        }
    }
}

/// Frees what `owner` held at `key` (a deleted Service's address, a port it no longer uses).
/// A record another Service holds is left alone.
pub async fn release(store: &Store, key: &str, owner: &Owner) {
    for _ in 0..5 {
        let Some(cur) = store.get(key) else { return };
        if records::owner_of(&cur.obj).as_ref() != Some(owner) {
            return;
        }
        let w = Write {
            key: key.to_string(),
            value: None,
            precondition: Precondition::Rev(cur.rev),
        };
        match store.write(w).await {
            Ok(_) | Err(StoreError::NotFound) => return,
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => {
                tracing::warn!(key, error = %e, "releasing an allocation failed; the repair pass frees it");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
