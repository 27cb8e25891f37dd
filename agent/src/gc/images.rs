//! Image garbage collection as the kubelet's image GC manager: when the image filesystem is used
//! past the high threshold, unused images are removed, least recently used first, until usage
//! is back to the low threshold; images a container uses, and images first seen less than the
//! minimum age ago, stay. The choice is pure (`choose`); `ImageGc` keeps what it learned of each
//! image between runs and removes through the runtime.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use crate::cri::Cri;

/// The kubelet's flags: --image-gc-high-threshold, --image-gc-low-threshold (percent of the
/// image filesystem; high 100 turns collection off), --minimum-image-ttl-duration.
#[derive(Clone, Debug)]
pub struct Policy {
    pub high_percent: u8,
    pub low_percent: u8,
    pub min_age: Duration,
}

impl Policy {
    pub fn check(&self) -> Result<(), String> {
        if self.high_percent > 100 || self.low_percent > 100 {
            return Err(
                "--image-gc-high-threshold and --image-gc-low-threshold are percentages (0-100)"
                    .into(),
            );
        }
        if self.low_percent > self.high_percent {
            return Err(format!(
                "--image-gc-low-threshold ({}) must not be above --image-gc-high-threshold ({})",
                self.low_percent, self.high_percent
            ));
        }
        Ok(())
    }

    /// Bytes to free for usage to go back to the low threshold, when it is at or past the high
    /// one (None otherwise, or with collection off).
    pub fn to_free(&self, capacity: u64, available: u64) -> Option<u64> {
        if self.high_percent >= 100 || capacity == 0 {
            return None;
        }
        let used = capacity.saturating_sub(available);
        let percent = used.saturating_mul(100) / capacity;
        (percent >= u64::from(self.high_percent)).then(|| {
            let low = capacity / 100 * u64::from(self.low_percent);
            used.saturating_sub(low)
        })
    }
}

/// What the collector knows of one image.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub id: String,
    pub size: u64,
    /// None: already there when the agent started (as the kubelet's first detection, old
    /// enough at once).
    pub first_seen: Option<Instant>,
    pub last_used: Option<Instant>,
    /// A container uses it, or it is pinned (the sandbox image): never removed.
    pub in_use: bool,
}

/// The images to remove to free `bytes` (all that may go, for `u64::MAX`): unused, old enough,
/// least recently used first (then the larger first).
pub fn choose(records: &[Record], bytes: u64, min_age: Duration, now: Instant) -> Vec<&Record> {
    let mut candidates: Vec<&Record> = records
        .iter()
        .filter(|r| {
            !r.in_use
                && r.first_seen
                    .is_none_or(|t| now.duration_since(t) >= min_age)
        })
        .collect();
    candidates.sort_by_key(|r| (r.last_used, std::cmp::Reverse(r.size)));
    let mut freed = 0u64;
    let mut out = Vec::new();
    for r in candidates {
        if freed >= bytes {
            break;
        }
        freed = freed.saturating_add(r.size);
        out.push(r);
    }
    out
}

/// The collector's memory of the node's images, across runs.
#[derive(Debug, Default)]
pub struct ImageGc {
    known: BTreeMap<String, Record>,
    detected: bool,
}

impl ImageGc {
    /// Refreshes what is known: new images first seen now, images a container uses last used
    /// now, removed images forgotten.
    async fn detect(&mut self, cri: &dyn Cri, now: Instant) -> Result<(), crate::cri::CriError> {
        let images = cri.list_images().await?;
        let containers = cri.list_containers(Default::default()).await?;
        let used: HashSet<&str> = containers
            .iter()
            .flat_map(|c| {
                [
                    c.image_ref.as_str(),
                    c.image.as_ref().map_or("", |i| i.image.as_str()),
                ]
            })
            .collect();
        // The sandbox image is pinned, as the kubelet keeps it: every new pod needs it.
        let sandbox = cri.sandbox_image().await.ok().flatten().unwrap_or_default();
        let ids: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        self.known.retain(|id, _| ids.contains(id.as_str()));
        let seen = std::mem::replace(&mut self.detected, true).then_some(now);
        for i in &images {
            let mut names = i.repo_tags.iter().chain(&i.repo_digests);
            let in_use = i.pinned
                || used.contains(i.id.as_str())
                || names.any(|n| used.contains(n.as_str()) || *n == sandbox);
            let r = self.known.entry(i.id.clone()).or_insert(Record {
                id: i.id.clone(),
                size: i.size,
                first_seen: seen,
                last_used: seen,
                in_use,
            });
            r.in_use = in_use;
            r.size = i.size;
            if in_use {
                r.last_used = Some(now);
            }
        }
        Ok(())
    }

    /// Removes images to free `bytes` (`u64::MAX`: every one that may go); returns the bytes
    /// freed and the images removed.
    pub async fn free(
        &mut self,
        cri: &dyn Cri,
        bytes: u64,
        min_age: Duration,
    ) -> Result<(u64, Vec<String>), crate::cri::CriError> {
        let now = Instant::now();
        self.detect(cri, now).await?;
        let records: Vec<Record> = self.known.values().cloned().collect();
        tracing::debug!(?records, "images known to garbage collection");
        let mut freed = 0;
        let mut removed = Vec::new();
        for r in choose(&records, bytes, min_age, now) {
            match cri.remove_image(&r.id).await {
                Ok(()) => {
                    freed += r.size;
                    removed.push(r.id.clone());
                    self.known.remove(&r.id);
                }
                // An image a container started to use since detection: it stays.
                Err(e) => tracing::info!(image = %r.id, error = %e, "image not removed"),
            }
        }
        if !removed.is_empty() {
            tracing::info!(images = ?removed, freed, "image garbage collection removed unused images");
        }
        Ok((freed, removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_decide_when_and_how_much() {
        let p = Policy {
            high_percent: 85,
            low_percent: 80,
            min_age: Duration::from_secs(120),
        };
        assert_eq!(
            p.to_free(1000, 200),
            None,
            "80% used: below the high threshold"
        );
        assert_eq!(p.to_free(1000, 100), Some(100), "90% used: back to 80%");
        let off = Policy {
            high_percent: 100,
            ..p.clone()
        };
        assert_eq!(off.to_free(1000, 0), None, "100 turns collection off");
        assert!(Policy {
            low_percent: 90,
            ..p.clone()
        }
        .check()
        .unwrap_err()
        .contains("must not be above"));
        assert!(p.check().is_ok());
    }

    #[test]
    fn unused_old_images_go_least_recently_used_first() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let r = |id: &str, size, seen, used, in_use| Record {
            id: id.into(),
            size,
            first_seen: Some(at(seen)),
            last_used: Some(at(used)),
            in_use,
        };
        let records = vec![
            r("running", 500, 0, 300, true),
            r("old", 100, 0, 10, false),
            r("recent", 100, 0, 200, false),
            r("fresh", 900, 290, 290, false),
        ];
        let mut at_start = r("at-start", 10, 0, 0, false);
        (at_start.first_seen, at_start.last_used) = (None, None);
        let ids = |v: Vec<&Record>| v.into_iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        // Found when the agent started: old enough at once, and the least recently used.
        assert_eq!(
            ids(choose(
                &[at_start.clone()],
                1,
                Duration::from_secs(60),
                at(0)
            )),
            ["at-start"]
        );
        let min_age = Duration::from_secs(60);
        assert_eq!(ids(choose(&records, 50, min_age, at(300))), ["old"]);
        assert_eq!(
            ids(choose(&records, 150, min_age, at(300))),
            ["old", "recent"]
        );
        // In use or younger than the minimum age: never, however much is asked.
        assert_eq!(
            ids(choose(&records, u64::MAX, min_age, at(300))),
            ["old", "recent"]
        );
    }
}
