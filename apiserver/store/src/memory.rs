//! The committed objects in memory and the watch history beside them, shared by the Store's
//! readers and whichever writer commits (the SQLite writer thread or etcd's watch feed).

use super::watch::WatchCache;
use super::{Check, Entry, Event, Rev, Row};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub(super) struct State {
    pub(super) objects: BTreeMap<String, Entry>,
    pub(super) rev: Rev,
}

pub(super) struct Shared {
    pub(super) state: RwLock<State>,
    pub(super) cache: Arc<WatchCache>,
}

impl Shared {
    pub(super) fn new(
        objects: BTreeMap<String, Entry>,
        rev: Rev,
        history: Vec<Arc<Event>>,
        max_events: usize,
        max_age: Duration,
    ) -> Arc<Shared> {
        let cache = Arc::new(WatchCache::new(rev, max_events, max_age));
        {
            let mut hist = cache.lock();
            cache.preload(&mut hist, history);
        }
        Arc::new(Shared {
            state: RwLock::new(State { objects, rev }),
            cache,
        })
    }

    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes committed changes visible: memory first, then watchers, under the history lock so
    /// that a new watch's snapshot and its stream never miss or repeat an event.
    pub(super) fn publish(
        &self,
        changed: HashMap<String, Option<Entry>>,
        rev: Rev,
        events: Vec<Arc<Event>>,
    ) {
        let mut hist = self.cache.lock();
        {
            let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
            for (key, e) in changed {
                match e {
                    Some(e) => st.objects.insert(key, e),
                    None => st.objects.remove(&key),
                };
            }
            st.rev = st.rev.max(rev);
        }
        self.cache.publish(&mut hist, events);
    }
}

impl Shared {
    /// Memory becomes `objects` at `rev`; the watch history starts over (see `WatchCache::reset`).
    pub(super) fn replace(&self, objects: BTreeMap<String, Entry>, rev: Rev) {
        let mut hist = self.cache.lock();
        {
            let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
            st.objects = objects;
            st.rev = rev;
        }
        self.cache.reset(&mut hist, rev);
    }
}

/// Splits loaded rows into the objects served and those refused, with the reason.
pub(super) fn checked(
    rows: Vec<Row>,
    check: Check,
) -> (BTreeMap<String, Entry>, Vec<(Row, String)>) {
    let mut objects = BTreeMap::new();
    let mut refused = Vec::new();
    for row in rows {
        match decodable(&row.key, &row.json, check) {
            Ok(()) => {
                objects.insert(row.key, Entry::from_json(row.rev, row.json));
            }
            Err(reason) => refused.push((row, reason)),
        }
    }
    (objects, refused)
}

/// Whether stored bytes parse (within serde_json's nesting limit) and pass `check`.
pub(super) fn decodable(key: &str, json: &[u8], check: Check) -> Result<(), String> {
    let obj: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("invalid JSON: {e}"))?;
    check(key, &obj)
}
