//! What to do with each new Event, as upstream's recorder decides it (client-go's
//! `EventCorrelator`): a spam filter (a token bucket per source + object: 25 at once, then one
//! per 5 minutes) drops floods; the 10th distinct message of one source + object + type + reason
//! within 10 minutes turns them into one "(combined from similar events): ..." Event; and a
//! repeat of one already written bumps that Event's count instead of making a new object.
//! Pure: the clock is passed in.

use std::collections::{HashMap, HashSet, VecDeque};
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
    /// Similar Events: the same but for the message.
    fn similar(&self) -> EventKey {
        EventKey {
            message: String::new(),
            ..self.clone()
        }
    }

    /// The spam filter counts per source and object, whatever the reason.
    fn spam_key(&self) -> (String, String, [String; 5]) {
        (
            self.component.clone(),
            self.host.clone(),
            self.object.clone(),
        )
    }
}

/// The decision for one Event. `key` is what it is counted under (the similar Events' key once
/// they are combined), `message` what to write.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write a new Event object named `name`.
    Create {
        name: String,
        key: EventKey,
        message: String,
    },
    /// Raise the count of the Event `name` (already written) to `count`.
    Patch {
        name: String,
        count: i32,
        key: EventKey,
        message: String,
    },
    /// Too many Events about this object from this source: drop it.
    Drop,
}

/// The distinct messages of similar Events, and when the last came.
struct Similar {
    messages: HashSet<String>,
    at: Instant,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Upstream's defaults: 25 Events at once per source + object, then one every 5 minutes.
const BURST: f64 = 25.0;
const REFILL_EVERY: Duration = Duration::from_secs(300);
/// Upstream's LRU size for the caches; the oldest entry goes first.
const CACHE_SIZE: usize = 4096;
/// Upstream's aggregation: this many distinct messages of similar Events...
const SIMILAR_MESSAGES: usize = 10;
/// ...each within this long of the previous one, are combined.
const SIMILAR_WINDOW: Duration = Duration::from_secs(600);

#[derive(Default)]
pub struct Correlator {
    seen: HashMap<EventKey, (String, i32)>,
    seen_order: VecDeque<EventKey>,
    buckets: HashMap<(String, String, [String; 5]), Bucket>,
    bucket_order: VecDeque<(String, String, [String; 5])>,
    similar: HashMap<EventKey, Similar>,
    similar_order: VecDeque<EventKey>,
}

impl Correlator {
    /// Decides what to write for `key` at `now`; `new_name` names a new object when one is made.
    pub fn observe(&mut self, key: &EventKey, now: Instant, new_name: String) -> Decision {
        if !self.take_token(key.spam_key(), now) {
            return Decision::Drop;
        }
        let (key, message) = self.aggregate(key, now);
        if let Some((name, count)) = self.seen.get_mut(&key) {
            *count += 1;
            return Decision::Patch {
                name: name.clone(),
                count: *count,
                key,
                message,
            };
        }
        self.created(&key, new_name.clone());
        Decision::Create {
            name: new_name,
            key,
            message,
        }
    }

    /// The Event `name` was written for `key` (count 1).
    pub fn created(&mut self, key: &EventKey, name: String) {
        remember(&mut self.seen, &mut self.seen_order, key.clone(), (name, 1));
    }

    /// The Event `key` was not written, or was lost (expired on the server): the next repeat
    /// makes a new one.
    pub fn forget(&mut self, key: &EventKey) {
        self.seen.remove(key);
    }

    /// The key and message to write `key` under: its own, or the similar Events' combined one.
    fn aggregate(&mut self, key: &EventKey, now: Instant) -> (EventKey, String) {
        let similar = key.similar();
        let fresh = Similar {
            messages: HashSet::new(),
            at: now,
        };
        if self
            .similar
            .get(&similar)
            .is_none_or(|s| now.duration_since(s.at) > SIMILAR_WINDOW)
        {
            remember(
                &mut self.similar,
                &mut self.similar_order,
                similar.clone(),
                fresh,
            );
        }
        let Some(record) = self.similar.get_mut(&similar) else {
            return (key.clone(), key.message.clone());
        };
        record.at = now;
        record.messages.insert(key.message.clone());
        if record.messages.len() < SIMILAR_MESSAGES {
            return (key.clone(), key.message.clone());
        }
        // Keep the set at its cap, as upstream does.
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        let message = format!("(combined from similar events): {}", key.message);
        (similar, message)
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

    /// (name, count, message) written, or None when dropped.
    fn write(
        c: &mut Correlator,
        k: &EventKey,
        now: Instant,
        name: &str,
    ) -> Option<(String, i32, String)> {
        match c.observe(k, now, name.into()) {
            Decision::Create { name, message, .. } => Some((name, 1, message)),
            Decision::Patch {
                name,
                count,
                message,
                ..
            } => Some((name, count, message)),
            Decision::Drop => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeat_bumps_the_count_of_the_first_event() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let a = key("web", "0/1 nodes are available");
        let m = "0/1 nodes are available".to_string();
        assert_eq!(
            write(&mut c, &a, now, "web.1"),
            Some(("web.1".into(), 1, m.clone()))
        );
        assert_eq!(
            write(&mut c, &a, now, "web.2"),
            Some(("web.1".into(), 2, m.clone()))
        );
        // Another message about the same object is another Event.
        let b = key("web", "0/2 nodes are available");
        assert_eq!(
            write(&mut c, &b, now, "web.3").map(|w| w.0),
            Some("web.3".into())
        );
        c.forget(&a);
        assert_eq!(
            write(&mut c, &a, now, "web.4"),
            Some(("web.4".into(), 1, m))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_tenth_distinct_message_within_10_minutes_is_combined() {
        let mut c = Correlator::default();
        let start = Instant::now();
        for i in 0..9 {
            let w = write(
                &mut c,
                &key("web", &format!("m{i}")),
                start,
                &format!("n{i}"),
            );
            assert_eq!(w, Some((format!("n{i}"), 1, format!("m{i}"))));
        }
        let combined = |m: &str| format!("(combined from similar events): {m}");
        let w = write(&mut c, &key("web", "m9"), start, "n9");
        assert_eq!(w, Some(("n9".into(), 1, combined("m9"))));
        let w = write(&mut c, &key("web", "m10"), start, "n10");
        assert_eq!(w, Some(("n9".into(), 2, combined("m10"))));
        // After 10 quiet minutes, messages stand alone again.
        let later = start + SIMILAR_WINDOW + Duration::from_secs(1);
        let w = write(&mut c, &key("web", "m11"), later, "n11");
        assert_eq!(w, Some(("n11".into(), 1, "m11".into())));
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_about_one_object_is_cut_to_25_then_one_per_5_minutes() {
        let mut c = Correlator::default();
        let start = Instant::now();
        let written = (0..40)
            .filter_map(|i| {
                write(
                    &mut c,
                    &key("web", &format!("m{i}")),
                    start,
                    &format!("n{i}"),
                )
            })
            .count();
        assert_eq!(written, 25);
        // Another object has its own bucket.
        assert!(write(&mut c, &key("db", "m"), start, "db.1").is_some());
        let later = start + Duration::from_secs(299);
        assert_eq!(write(&mut c, &key("web", "x"), later, "x"), None);
        let later = start + Duration::from_secs(301);
        assert!(write(&mut c, &key("web", "y"), later, "y").is_some());
    }
}
