//! Answers of the API server kept for a short while, as the kubelet's webhook authenticator and
//! authorizer keep them: every request on port 10250 would otherwise cost one or two API calls.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long answers are kept (upstream's kubelet defaults; flags of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttls {
    /// --authentication-token-webhook-cache-ttl: a TokenReview's answer, either way.
    pub token: Duration,
    /// --authorization-webhook-cache-authorized-ttl.
    pub authorized: Duration,
    /// --authorization-webhook-cache-unauthorized-ttl.
    pub unauthorized: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Ttls {
            token: Duration::from_secs(120),
            authorized: Duration::from_secs(300),
            unauthorized: Duration::from_secs(30),
        }
    }
}

/// Entries kept at most; beyond, expired ones go first, then all (a client sending a new
/// token per request must not grow the agent without bound).
const MAX_ENTRIES: usize = 4096;

/// A map whose entries expire. `now` is passed in so tests run on a paused clock.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
    max: usize,
}

impl<K: Eq + Hash, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache::with_max(MAX_ENTRIES)
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn with_max(max: usize) -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
            max: max.max(1),
        }
    }

    /// The value kept for `key`, unless it expired.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let (value, expires) = entries.get(key)?;
        (now < *expires).then(|| value.clone())
    }

    /// Keeps `value` for `ttl` from `now` (a zero TTL keeps nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.max {
            entries.retain(|_, (_, expires)| now < *expires);
        }
        if entries.len() >= self.max {
            entries.clear();
        }
        entries.insert(key, (value, now + ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_ttl() {
        let cache = TtlCache::default();
        let t0 = Instant::now();
        cache.insert("a", 1, Duration::from_secs(30), t0);
        cache.insert("b", 2, Duration::from_secs(300), t0);
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(29)), Some(1));
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(30)), None);
        assert_eq!(cache.get(&"b", t0 + Duration::from_secs(299)), Some(2));
        assert_eq!(cache.get(&"c", t0), None);
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let cache = TtlCache::default();
        let t0 = Instant::now();
        cache.insert("a", 1, Duration::ZERO, t0);
        assert_eq!(cache.get(&"a", t0), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_then_all() {
        let cache = TtlCache::with_max(3);
        let t0 = Instant::now();
        let short = Duration::from_secs(1);
        let long = Duration::from_secs(100);
        cache.insert(1, 1, short, t0);
        cache.insert(2, 2, long, t0);
        cache.insert(3, 3, long, t0);
        let t1 = t0 + Duration::from_secs(2);
        cache.insert(4, 4, long, t1);
        assert_eq!(cache.len(), 3, "the expired entry made room");
        assert_eq!(cache.get(&2, t1), Some(2));
        cache.insert(5, 5, long, t1);
        assert_eq!(cache.len(), 1, "nothing expired: emptied, then the new one");
        assert_eq!(cache.get(&5, t1), Some(5));
    }
}
