//! What to do with each new Event, as upstream's recorder decides it (client-go's
//! `EventCorrelator`): a repeat of one already written (same object, type, reason, message and
//! source) bumps that Event's count instead of making a new object, and a spam filter (a token
//! bucket per source + object: 25 at once, then one per 5 minutes) drops floods. Pure: the clock
//! is passed in.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// What identifies "the same Event again".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// Namespace, kind, name, uid and fieldPath of the involved object.
    pub object: [String; 5],
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub component: String,
    pub host: String,
}

impl EventKey {
    /// The spam filter counts per source and object, whatever the reason.
    fn spam_key(&self) -> (String, String, [String; 5]) {
        (
            self.component.clone(),
            self.host.clone(),
            self.object.clone(),
        )
    }
}

/// The decision for one Event.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write a new Event object named `name`.
    Create { name: String },
    /// Raise the count of the Event `name` (already written) to `count`.
    Patch { name: String, count: i32 },
    /// Too many Events about this object from this source: drop it.
    Drop,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Upstream's defaults: 25 Events at once per source + object, then one every 5 minutes.
const BURST: f64 = 25.0;
const REFILL_EVERY: Duration = Duration::from_secs(300);
/// Upstream's LRU size for both caches; the oldest entry goes first.
const CACHE_SIZE: usize = 4096;

#[derive(Default)]
pub struct Correlator {
    seen: HashMap<EventKey, (String, i32)>,
    seen_order: VecDeque<EventKey>,
    buckets: HashMap<(String, String, [String; 5]), Bucket>,
    bucket_order: VecDeque<(String, String, [String; 5])>,
}

impl Correlator {
    /// Decides what to write for `key` at `now`; `new_name` names a new object when one is made.
    pub fn observe(&mut self, key: &EventKey, now: Instant, new_name: String) -> Decision {
        if !self.take_token(key.spam_key(), now) {
            return Decision::Drop;
        }
        if let Some((name, count)) = self.seen.get_mut(key) {
            *count += 1;
            return Decision::Patch {
                name: name.clone(),
                count: *count,
            };
        }
        remember(
            &mut self.seen,
            &mut self.seen_order,
            key.clone(),
            (new_name.clone(), 1),
        );
        Decision::Create { name: new_name }
    }

    /// The Event `key` was lost (its object expired on the server): the next repeat makes a new one.
    pub fn forget(&mut self, key: &EventKey) {
        self.seen.remove(key);
    }

    fn take_token(&mut self, spam: (String, String, [String; 5]), now: Instant) -> bool {
        if !self.buckets.contains_key(&spam) {
            let full = Bucket {
                tokens: BURST,
                at: now,
            };
            remember(
                &mut self.buckets,
                &mut self.bucket_order,
                spam.clone(),
                full,
            );
        }
        let Some(b) = self.buckets.get_mut(&spam) else {
            return true;
        };
        let refill = now.duration_since(b.at).as_secs_f64() / REFILL_EVERY.as_secs_f64();
        b.tokens = (b.tokens + refill).min(BURST);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Inserts into a map bounded to CACHE_SIZE entries, dropping the oldest inserted first.
fn remember<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    order: &mut VecDeque<K>,
    key: K,
    value: V,
) {
    while map.len() >= CACHE_SIZE {
        match order.pop_front() {
            Some(old) => {
                map.remove(&old);
            }
            None => break,
        }
    }
    order.retain(|k| k != &key);
    order.push_back(key.clone());
    map.insert(key, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(object: &str, message: &str) -> EventKey {
        EventKey {
            object: [
                "ns".into(),
                "Pod".into(),
                object.into(),
                "uid".into(),
                String::new(),
            ],
            type_: "Warning".into(),
            reason: "FailedScheduling".into(),
            message: message.into(),
            component: "default-scheduler".into(),
            host: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeat_bumps_the_count_of_the_first_event() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let a = key("web", "0/1 nodes are available");
        assert_eq!(
            c.observe(&a, now, "web.1".into()),
            Decision::Create {
                name: "web.1".into()
            }
        );
        assert_eq!(
            c.observe(&a, now, "web.2".into()),
            Decision::Patch {
                name: "web.1".into(),
                count: 2
            }
        );
        // Another message about the same object is another Event.
        let b = key("web", "0/2 nodes are available");
        assert_eq!(
            c.observe(&b, now, "web.3".into()),
            Decision::Create {
                name: "web.3".into()
            }
        );
        c.forget(&a);
        assert_eq!(
            c.observe(&a, now, "web.4".into()),
            Decision::Create {
                name: "web.4".into()
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_about_one_object_is_cut_to_25_then_one_per_5_minutes() {
        let mut c = Correlator::default();
        let start = Instant::now();
        let written = (0..40)
            .map(|i| c.observe(&key("web", &format!("m{i}")), start, format!("n{i}")))
            .filter(|d| *d != Decision::Drop)
            .count();
        assert_eq!(written, 25);
        // Another object has its own bucket.
        assert_ne!(
            c.observe(&key("db", "m"), start, "db.1".into()),
            Decision::Drop
        );
        let later = start + Duration::from_secs(299);
        assert_eq!(
            c.observe(&key("web", "x"), later, "x".into()),
            Decision::Drop
        );
        let later = start + Duration::from_secs(301);
        assert_ne!(
            c.observe(&key("web", "y"), later, "y".into()),
            Decision::Drop
        );
    }
}
