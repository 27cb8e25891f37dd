//! Address allocation over a `Store`: one address per range set, round-robin, idempotent for
//! the same owner (so an ADD retried after a crash gets its earlier address back).

use std::collections::HashSet;
use std::io;
use std::net::IpAddr;

use super::range::{candidates, Range};
use super::store::{Owner, Store};
use crate::error::{code, CniError, Result};

/// One address handed out, with the range it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    pub set_index: usize,
    pub range: Range,
    pub ip: IpAddr,
}

fn store_err(what: &str, e: io::Error) -> CniError {
    CniError::io(format!("IPAM store: {what} failed"), &e)
}

pub fn allocate(
    store: &mut dyn Store,
    sets: &[Vec<Range>],
    owner: &Owner,
) -> Result<Vec<Allocated>> {
    // The owner's index makes this O(1): no scan of every allocation on the hot path.
    let mut mine: Vec<IpAddr> = Vec::new();
    let indexed = store
        .indexed(owner)
        .map_err(|e| store_err("reading owner index", e))?;
    for ip in indexed.unwrap_or_default() {
        let held = store
            .owner_of(ip)
            .map_err(|e| store_err("reading allocation", e))?;
        if held.as_ref() == Some(owner) {
            mine.push(ip);
        }
    }
    let mut out: Vec<Allocated> = Vec::new();
    let mut fresh: Vec<IpAddr> = Vec::new();
    for (set_index, set) in sets.iter().enumerate() {
        let reuse = mine.iter().find_map(|ip| {
            set.iter()
                .find(|r| r.contains(*ip))
                .map(|r| (r.clone(), *ip))
        });
        let got = match reuse {
            Some((range, ip)) => Some(Allocated {
                set_index,
                range,
                ip,
            }),
            None => match pick(store, set, set_index, owner) {
                Ok(got) => got.inspect(|a| fresh.push(a.ip)),
                Err(e) => {
                    rollback(store, &fresh);
                    return Err(e);
                }
            },
        };
        match got {
            Some(a) => out.push(a),
            None => {
                rollback(store, &fresh);
                let ranges: Vec<String> = set
                    .iter()
                    .map(|r| format!("{}-{} in {}", r.start, r.end, r.subnet))
                    .collect();
                return Err(CniError::new(
                    code::RANGE_EXHAUSTED,
                    format!("no free address in range set {set_index} ({})", ranges.join(", ")),
                    "every address is allocated: delete unused attachments, run GC, or widen the range",
                ));
            }
        }
    }
    Ok(out)
}

fn pick(
    store: &mut dyn Store,
    set: &[Range],
    set_index: usize,
    owner: &Owner,
) -> Result<Option<Allocated>> {
    let last = store
        .last_reserved(set_index)
        .map_err(|e| store_err("reading last reserved address", e))?;
    for (range, ip) in candidates(set, last) {
        if store
            .reserve(ip, owner, set_index)
            .map_err(|e| store_err(&format!("reserving {ip}"), e))?
        {
            return Ok(Some(Allocated {
                set_index,
                range: range.clone(),
                ip,
            }));
        }
    }
    Ok(None)
}

fn rollback(store: &mut dyn Store, ips: &[IpAddr]) {
    for ip in ips {
        if let Err(e) = store.release(*ip) {
            tracing::warn!(%ip, error = %e, "IPAM rollback could not release address");
        }
    }
}

/// Releases what `owner` holds: the previous result's addresses (`hints`) and the owner's
/// index; only when neither exists is every allocation scanned (allocations made by another
/// tool, or an ADD that never reported).
pub fn release(store: &mut dyn Store, owner: &Owner, hints: &[IpAddr]) -> Result<Vec<IpAddr>> {
    let mut candidates: Vec<IpAddr> = hints.to_vec();
    match store
        .indexed(owner)
        .map_err(|e| store_err("reading owner index", e))?
    {
        Some(ix) => candidates.extend(ix),
        None if hints.is_empty() => {
            for (ip, o) in store
                .list()
                .map_err(|e| store_err("listing allocations", e))?
            {
                if o.matches(owner) {
                    candidates.push(ip);
                }
            }
        }
        None => {}
    }
    candidates.sort();
    candidates.dedup();
    let mut released = Vec::new();
    for ip in candidates {
        let held = store
            .owner_of(ip)
            .map_err(|e| store_err("reading allocation", e))?;
        if held.is_some_and(|o| o.matches(owner)) {
            store
                .release(ip)
                .map_err(|e| store_err(&format!("releasing {ip}"), e))?;
            released.push(ip);
        }
    }
    store
        .drop_index(owner)
        .map_err(|e| store_err("removing owner index", e))?;
    Ok(released)
}

/// Releases every allocation whose owner is not in `valid`.
pub fn gc(store: &mut dyn Store, valid: &HashSet<Owner>) -> Result<Vec<IpAddr>> {
    let mut released = Vec::new();
    for (ip, o) in store
        .list()
        .map_err(|e| store_err("listing allocations", e))?
    {
        let keep =
            valid.contains(&o) || (o.ifname.is_empty() && valid.iter().any(|v| v.id == o.id));
        if !keep {
            store
                .release(ip)
                .map_err(|e| store_err(&format!("releasing {ip}"), e))?;
            released.push(ip);
        }
    }
    store
        .drop_indexes_except(valid)
        .map_err(|e| store_err("removing owner indexes", e))?;
    Ok(released)
}

/// Free addresses per range set (for STATUS).
pub fn free_per_set(store: &dyn Store, sets: &[Vec<Range>]) -> Result<Vec<u128>> {
    let used = store
        .list()
        .map_err(|e| store_err("listing allocations", e))?;
    Ok(sets
        .iter()
        .map(|set| {
            // Saturating: two whole-space IPv6 ranges hold more than a u128 counts.
            let cap = set
                .iter()
                .map(Range::capacity)
                .fold(0, u128::saturating_add);
            let taken = used
                .iter()
                .filter(|(ip, _)| set.iter().any(|r| r.contains(*ip) && *ip != r.gateway))
                .count() as u128;
            cap.saturating_sub(taken)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipam::store::MemStore;

    fn set(cidr: &str) -> Vec<Range> {
        vec![Range::new(cidr.parse().unwrap(), None, None, None).unwrap()]
    }

    fn own(id: &str) -> Owner {
        Owner::new(id, "eth0")
    }

    #[test]
    fn hands_out_distinct_addresses_until_exhausted() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/29")];
        let mut seen = HashSet::new();
        for i in 0..5 {
            let got = allocate(&mut store, &sets, &own(&format!("c{i}"))).unwrap();
            assert!(seen.insert(got[0].ip), "duplicate {}", got[0].ip);
            assert_ne!(got[0].ip.to_string(), "10.1.0.1", "gateway handed out");
        }
        let err = allocate(&mut store, &sets, &own("c5")).unwrap_err();
        assert_eq!(err.code, code::RANGE_EXHAUSTED);
        assert!(err.msg.contains("10.1.0.0/29"), "{}", err.msg);
    }

    #[test]
    fn round_robin_does_not_reuse_freed_address_immediately() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24")];
        let a = allocate(&mut store, &sets, &own("a")).unwrap()[0].ip;
        release(&mut store, &own("a"), &[]).unwrap();
        let b = allocate(&mut store, &sets, &own("b")).unwrap()[0].ip;
        assert_ne!(a, b);
        assert_eq!(b.to_string(), "10.1.0.3");
    }

    #[test]
    fn same_owner_gets_same_address_back() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24")];
        let first = allocate(&mut store, &sets, &own("a")).unwrap();
        let again = allocate(&mut store, &sets, &own("a")).unwrap();
        assert_eq!(first, again);
        assert_eq!(store.allocs.len(), 1);
    }

    #[test]
    fn dual_stack_rolls_back_first_set_when_second_is_full() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24"), set("fd00::/126")];
        allocate(&mut store, &sets, &own("a")).unwrap();
        allocate(&mut store, &sets, &own("b")).unwrap();
        // fd00::/126 holds ::1 (gateway), ::2, ::3: full now.
        let err = allocate(&mut store, &sets, &own("c")).unwrap_err();
        assert_eq!(err.code, code::RANGE_EXHAUSTED);
        assert_eq!(
            store.allocs.len(),
            4,
            "c's IPv4 address must be rolled back"
        );
    }

    #[test]
    fn release_by_owner_with_and_without_hints() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24")];
        let a = allocate(&mut store, &sets, &own("a")).unwrap()[0].ip;
        allocate(&mut store, &sets, &own("b")).unwrap();
        // A hint naming someone else's address is ignored.
        let b_ip = *store.allocs.iter().find(|(_, o)| o.id == "b").unwrap().0;
        assert_eq!(release(&mut store, &own("a"), &[b_ip]).unwrap(), vec![a]);
        assert!(!store.index.contains_key(&own("a")));
        assert_eq!(
            release(&mut store, &own("a"), &[]).unwrap(),
            Vec::<IpAddr>::new()
        );
        assert_eq!(store.allocs.len(), 1);
        // Same container, other interface: untouched.
        assert!(release(&mut store, &Owner::new("b", "eth1"), &[])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn gc_releases_exactly_the_unlisted() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24")];
        for id in ["a", "b", "c", "d"] {
            allocate(&mut store, &sets, &own(id)).unwrap();
        }
        let valid: HashSet<Owner> = [own("a"), own("c")].into_iter().collect();
        let released = gc(&mut store, &valid).unwrap();
        assert_eq!(released.len(), 2);
        let left: Vec<&str> = store.allocs.values().map(|o| o.id.as_str()).collect();
        assert_eq!(left, ["a", "c"]);
    }

    #[test]
    fn free_count_for_status() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/29")];
        assert_eq!(free_per_set(&store, &sets).unwrap(), vec![5]);
        allocate(&mut store, &sets, &own("a")).unwrap();
        assert_eq!(free_per_set(&store, &sets).unwrap(), vec![4]);
        let whole = set("::/0").remove(0);
        let huge = vec![vec![whole.clone(), whole]];
        assert_eq!(free_per_set(&store, &huge).unwrap(), vec![u128::MAX]);
    }

    #[test]
    fn owner_file_format_is_host_local_compatible() {
        let o = Owner::new("abc", "eth0");
        assert_eq!(o.to_file(), "abc\r\neth0");
        assert_eq!(Owner::from_file("abc\r\neth0"), o);
        let old = Owner::from_file("abc");
        assert!(old.matches(&o));
    }
}

#[cfg(test)]
mod index_tests {
    use super::*;
    use crate::ipam::store::MemStore;

    fn set(cidr: &str) -> Vec<Range> {
        vec![Range::new(cidr.parse().unwrap(), None, None, None).unwrap()]
    }

    #[test]
    fn allocations_without_index_are_found_by_scan() {
        // As host-local writes them: no owner index.
        let mut store = MemStore::default();
        let o = Owner::new("old", "eth0");
        store.allocs.insert("10.1.0.7".parse().unwrap(), o.clone());
        assert_eq!(release(&mut store, &o, &[]).unwrap().len(), 1);
        assert!(store.allocs.is_empty());
    }

    #[test]
    fn stale_index_entry_is_harmless() {
        // A crash after the index entry but before the allocation file.
        let mut store = MemStore::default();
        let o = Owner::new("a", "eth0");
        let other = Owner::new("b", "eth0");
        store
            .index
            .insert(o.clone(), vec!["10.1.0.2".parse().unwrap()]);
        store
            .allocs
            .insert("10.1.0.2".parse().unwrap(), other.clone());
        // a's ADD must not adopt b's address, and a's DEL must not free it.
        let got = allocate(&mut store, &[set("10.1.0.0/24")], &o).unwrap();
        assert_ne!(got[0].ip.to_string(), "10.1.0.2");
        release(&mut store, &o, &[]).unwrap();
        assert_eq!(store.allocs.len(), 1);
        assert_eq!(store.allocs.values().next(), Some(&other));
    }

    #[test]
    fn gc_drops_indexes_of_collected_owners() {
        let mut store = MemStore::default();
        let sets = vec![set("10.1.0.0/24")];
        allocate(&mut store, &sets, &Owner::new("a", "eth0")).unwrap();
        allocate(&mut store, &sets, &Owner::new("b", "eth0")).unwrap();
        let keep: HashSet<Owner> = [Owner::new("a", "eth0")].into_iter().collect();
        gc(&mut store, &keep).unwrap();
        assert_eq!(store.index.len(), 1);
    }
}
