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

    /// Allocates `want`, or a random free address when None, for `owner`. A dry run only
    /// checks (against what this server has seen) and stores nothing.
    pub async fn allocate_ip(
        &self,
        store: &Store,
        want: Option<Ipv4Addr>,
        owner: &Owner,
        dry_run: bool,
    ) -> Result<(Ipv4Addr, Option<Held>), AllocError> {
        let pool = self.ip_pool();
        let want = want.map(|ip| match pool.members.contains(&u32::from(ip)) {
            true if self.net.contains(ip) => Ok(u32::from(ip)),
            _ => Err(AllocError::IpOutOfRange(ip, self.net)),
        });
        let (n, held) = pool
            .allocate(store, want.transpose()?, owner, dry_run)
            .await?;
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
        let pool = self.port_pool();
        let want = want.map(|p| match u32::try_from(p) {
            Ok(n) if pool.members.contains(&n) => Ok(n),
            _ => Err(AllocError::PortOutOfRange(p, lo, hi)),
        });
        let (n, held) = pool
            .allocate(store, want.transpose()?, owner, dry_run)
            .await?;
        Ok((n as u16, held))
    }

    fn ip_pool(&self) -> Pool {
        // The network address and broadcast are never handed out.
        let first = u32::from(self.net.network()) + 1;
        let last = u32::from(self.net.broadcast()).saturating_sub(1);
        Pool {
            members: first..=last.max(first),
            key: |n| records::ip_key(Ipv4Addr::from(n)),
            taken: |n| AllocError::IpTaken(Ipv4Addr::from(n)),
            exhausted: AllocError::IpExhausted(self.net),
        }
    }

    fn port_pool(&self) -> Pool {
        let (lo, hi) = (*self.ports.start(), *self.ports.end());
        Pool {
            members: lo.into()..=hi.into(),
            key: |n| records::port_key(n as u16),
            taken: |n| AllocError::PortTaken(n as u16),
            exhausted: AllocError::PortsExhausted(lo, hi),
        }
    }
}

/// One pool, addresses or ports, as numbers: which members it has, where a member's record
/// lives, and what its errors say. The rest of allocating is the same for both.
struct Pool {
    members: RangeInclusive<u32>,
    key: fn(u32) -> String,
    taken: fn(u32) -> AllocError,
    exhausted: AllocError,
}

impl Pool {
    /// Claims `want` (already checked to be a member), or searches for a free member.
    async fn allocate(
        self,
        store: &Store,
        want: Option<u32>,
        owner: &Owner,
        dry_run: bool,
    ) -> Result<(u32, Option<Held>), AllocError> {
        if let Some(n) = want {
            return match claim(store, &(self.key)(n), owner, dry_run).await? {
                Some(held) => Ok((n, held)),
                None => Err((self.taken)(n)),
            };
        }
        if let Some(found) = self.search(store, owner, dry_run).await? {
            return Ok(found);
        }
        // This server saw the pool full: once more after catching up with the store (another
        // server may have freed one a moment ago).
        store.sync().await.map_err(AllocError::Store)?;
        let found = self.search(store, owner, dry_run).await?;
        found.ok_or(self.exhausted)
    }

    /// Walks the members from a random start and claims the first free one: skips those this
    /// server has seen taken, and moves on when another server took one first.
    async fn search(
        &self,
        store: &Store,
        owner: &Owner,
        dry_run: bool,
    ) -> Result<Option<(u32, Option<Held>)>, AllocError> {
        let first = *self.members.start();
        let size = u64::from(self.members.end() - first) + 1;
        let start = rand::rng().random_range(0..size);
        for i in 0..size {
            let n = first + ((start + i) % size) as u32;
            let key = (self.key)(n);
            if store.get(&key).is_some() {
                continue;
            }
            if let Some(held) = claim(store, &key, owner, dry_run).await? {
                return Ok(Some((n, held)));
            }
        }
        Ok(None)
    }
}

/// Claims `key` for `owner`: Some when it is now ours (None inside for a dry run), None when
/// it was taken.
async fn claim(
    store: &Store,
    key: &str,
    owner: &Owner,
    dry_run: bool,
) -> Result<Option<Option<Held>>, AllocError> {
    if dry_run {
        return Ok(store.get(key).is_none().then_some(None));
    }
    let created = create_record(store, key, owner).await;
    let rev = created.map_err(AllocError::Store)?;
    Ok(rev.map(|rev| {
        Some(Held {
            key: key.to_string(),
            rev,
        })
    }))
}

/// Creates the record at `key` for `owner`, named as the last part of its key, if there is
/// none: its revision, or None when one was there.
async fn create_record(store: &Store, key: &str, owner: &Owner) -> Result<Option<Rev>, StoreError> {
    let name = key.rsplit('/').next().unwrap_or_default();
    let w = Write {
        key: key.to_string(),
        value: Some(records::record(key, name, owner)),
        precondition: Precondition::MustNotExist,
    };
    match store.write(w).await {
        Ok(e) => Ok(Some(e.rev)),
        Err(StoreError::AlreadyExists) => Ok(None),
        Err(e) => Err(e),
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
