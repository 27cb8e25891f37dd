//! Events expire: upstream stores each Event under an etcd lease of --event-ttl; here a sweep
//! deletes the Events last seen longer ago than that.

use super::Api;
use crate::object;
use crate::resources::RESOURCES;
use crate::store::{Precondition, Write};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

/// When an Event was last seen: the latest of lastTimestamp, eventTime,
/// series.lastObservedTime and creationTimestamp.
fn last_seen(ev: &Value) -> Option<DateTime<Utc>> {
    [
        "/lastTimestamp",
        "/eventTime",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .into_iter()
    .filter_map(|field| object::timestamp(ev.pointer(field)?))
    .max()
}

/// Deletes every Event last seen more than `ttl` ago; returns how many went.
pub async fn expire_events(api: &Api, ttl: Duration) -> usize {
    let Ok(ttl) = chrono::Duration::from_std(ttl) else {
        return 0;
    };
    let Some(deadline) = Utc::now().checked_sub_signed(ttl) else {
        return 0;
    };
    let mut prefixes: Vec<String> = RESOURCES
        .iter()
        .filter(|r| r.kind == "Event")
        .map(|r| r.key_prefix())
        .collect();
    prefixes.dedup();
    let mut gone = 0;
    for prefix in prefixes {
        for (key, e) in api.store.list_keyed(&prefix).0 {
            if last_seen(&e.value()).is_some_and(|t| t >= deadline) {
                continue;
            }
            let w = Write {
                key,
                value: None,
                // An Event updated since it was read is not expired.
                precondition: Precondition::Rev(e.rev),
            };
            if api.store.write(w).await.is_ok() {
                gone += 1;
            }
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_latest_time_counts() {
        let ev = json!({
            "metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
            "lastTimestamp": "2024-01-02T00:00:00Z",
            "eventTime": "bad",
        });
        assert_eq!(
            last_seen(&ev).unwrap().to_rfc3339(),
            "2024-01-02T00:00:00+00:00"
        );
        assert_eq!(last_seen(&json!({"metadata": {}})), None);
    }
}
