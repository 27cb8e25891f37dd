//! The repair pass, as upstream's ClusterIP and NodePort repair controllers: at start and
//! every few minutes, records the addresses and ports Services hold that have no record (data
//! from before records existed, a record lost to a crash) and frees records no Service holds
//! (a create that failed or a delete that stopped half-way). A record younger than the grace
//! period is left alone: another server may be between storing it and storing its Service.

use super::records::{self, Owner, IP_PREFIX, PORT_PREFIX};
use super::{create_record, undo, Held};
use crate::store::Store;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::time::Duration;

/// How often the pass runs after the first (upstream's repair interval).
pub const INTERVAL: Duration = Duration::from_secs(180);
/// How old a record no Service holds must be before it is freed.
pub const GRACE: Duration = Duration::from_secs(60);

/// A stored record, as the pass sees it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub key: String,
    pub rev: u64,
    pub owner: Option<Owner>,
    pub created: Option<DateTime<Utc>>,
}

/// What the pass does.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Keys held by a Service without a record: recorded for that Service.
    pub record: Vec<(String, Owner)>,
    /// Records no Service holds, old enough to free.
    pub free: Vec<Held>,
    /// Keys held by a Service whose record names another Service: (key, holder, recorded).
    pub conflicts: Vec<(String, Owner, Owner)>,
}

/// The decision, from what Services hold and the records, at `now`.
pub fn plan(held: &[(String, Owner)], seen: &[Seen], now: DateTime<Utc>, grace: Duration) -> Plan {
    let mut out = Plan::default();
    let by_key: HashMap<&str, &Seen> = seen.iter().map(|s| (s.key.as_str(), s)).collect();
    let holds: HashSet<(&str, &Owner)> = held.iter().map(|(k, o)| (k.as_str(), o)).collect();
    let held_keys: HashSet<&str> = held.iter().map(|(k, _)| k.as_str()).collect();
    for (key, owner) in held {
        match by_key.get(key.as_str()).and_then(|s| s.owner.as_ref()) {
            None if by_key.contains_key(key.as_str()) => {}
            None => out.record.push((key.clone(), owner.clone())),
            Some(o) if o == owner => {}
            Some(o) => out.conflicts.push((key.clone(), owner.clone(), o.clone())),
        }
    }
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    for s in seen {
        let kept = s
            .owner
            .as_ref()
            .is_some_and(|o| holds.contains(&(s.key.as_str(), o)));
        // A record of another Service's key is kept: that Service is told of the conflict.
        let conflicting = held_keys.contains(s.key.as_str());
        let young = s
            .created
            .is_none_or(|c| now.signed_duration_since(c) < grace);
        if !kept && !conflicting && !young {
            out.free.push(Held {
                key: s.key.clone(),
                rev: s.rev,
            });
        }
    }
    out
}

/// The record keys a Service holds: its ClusterIP and its NodePorts.
pub fn held_keys(svc: &Value) -> Vec<String> {
    let ip = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Ipv4Addr>().ok())
        .map(records::ip_key);
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort")?.as_u64())
        .filter_map(|p| u16::try_from(p).ok().filter(|p| *p > 0))
        .map(records::port_key);
    ip.into_iter().chain(ports).collect()
}

/// One pass over the store; returns how many records it made and freed.
pub async fn run(store: &Store) -> (usize, usize) {
    let services = crate::resources::lookup("", "v1", "services")
        .map(|r| store.list(&r.key_prefix()).0)
        .unwrap_or_default();
    let held: Vec<(String, Owner)> = services
        .iter()
        .flat_map(|e| {
            let owner = Owner::of(&e.obj);
            held_keys(&e.obj)
                .into_iter()
                .map(move |k| (k, owner.clone()))
        })
        .collect();
    let seen: Vec<Seen> = [IP_PREFIX, PORT_PREFIX]
        .iter()
        .flat_map(|p| store.list_keyed(p).0)
        .map(|(key, e)| Seen {
            key,
            rev: e.rev,
            owner: records::owner_of(&e.obj),
            created: records::created(&e.obj),
        })
        .collect();
    let plan = plan(&held, &seen, Utc::now(), GRACE);
    for (key, holder, recorded) in &plan.conflicts {
        tracing::warn!(%key, service = %holder, recorded_for = %recorded, "a Service holds an address or port recorded for another Service; one of them must change it");
    }
    let mut made = 0;
    for (key, owner) in &plan.record {
        match create_record(store, key, owner).await {
            Ok(Some(_)) => made += 1,
            Ok(None) => {}
            Err(e) => tracing::warn!(%key, error = %e, "recording an allocation failed"),
        }
    }
    let freed = plan.free.len();
    for h in plan.free {
        tracing::info!(key = h.key, "freeing an allocation no Service holds");
        undo(store, h).await;
    }
    (made, freed)
}

/// `run` every INTERVAL for the server's lifetime (the start runs it once before serving).
pub async fn every_interval(store: Store) {
    let first = tokio::time::Instant::now() + INTERVAL;
    let mut tick = tokio::time::interval_at(first, INTERVAL);
    loop {
        tick.tick().await;
        let (made, freed) = run(&store).await;
        if made + freed > 0 {
            tracing::info!(recorded = made, freed, "allocation repair");
        }
    }
}

#[cfg(test)]
mod tests;
