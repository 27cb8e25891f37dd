//! CPU rates (nano cores) from cumulative CPU time: the background sampler records samples, and
//! a request divides the growth since the newest sample at least [`MIN_WINDOW_NS`] older than
//! its own reading. The agent computes every rate itself, even when the runtime offers one, so
//! the node, pods and containers are measured the same way.

use std::collections::{HashMap, HashSet};

/// Shorter windows make a rate from the noise of when counters were last updated.
pub const MIN_WINDOW_NS: i64 = 1_000_000_000;

/// Cumulative CPU time (`usage_ns`) read at `at_ns` (nanoseconds since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub at_ns: i64,
    pub usage_ns: u64,
}

/// The two newest samples of one counter: with samples every 10 s, one of them is at least a
/// second older than any reading.
#[derive(Clone, Debug, Default)]
struct Recent {
    newest: Option<Sample>,
    before: Option<Sample>,
}

impl Recent {
    fn record(&mut self, s: Sample) {
        if self.newest.is_some_and(|n| n.at_ns >= s.at_ns) {
            return;
        }
        self.before = self.newest.replace(s);
    }

    fn rate(&self, now: Sample) -> Option<u64> {
        let old = [self.newest, self.before]
            .into_iter()
            .flatten()
            .find(|s| now.at_ns.saturating_sub(s.at_ns) >= MIN_WINDOW_NS)?;
        nano_cores(old, now)
    }
}

/// Nano cores used between two samples; None if the counter went back (a reset).
pub fn nano_cores(old: Sample, new: Sample) -> Option<u64> {
    let used = u128::from(new.usage_ns.checked_sub(old.usage_ns)?);
    let window = u128::try_from(new.at_ns.checked_sub(old.at_ns)?)
        .ok()
        .filter(|w| *w > 0)?;
    u64::try_from(used * 1_000_000_000 / window).ok()
}

/// Samples of the node and of each container (by container id).
#[derive(Debug, Default)]
pub struct History {
    node: Recent,
    containers: HashMap<String, Recent>,
}

impl History {
    pub fn record_node(&mut self, s: Sample) {
        self.node.record(s);
    }

    pub fn record_container(&mut self, id: &str, s: Sample) {
        self.containers.entry(id.to_string()).or_default().record(s);
    }

    /// Forgets containers that are gone, so the history does not grow with every container
    /// the node ever ran.
    pub fn keep_only(&mut self, ids: &HashSet<&str>) {
        self.containers.retain(|id, _| ids.contains(id.as_str()));
    }

    pub fn node_rate(&self, now: Sample) -> Option<u64> {
        self.node.rate(now)
    }

    pub fn container_rate(&self, id: &str, now: Sample) -> Option<u64> {
        self.containers.get(id)?.rate(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn at(secs: f64, usage_ms: u64) -> Sample {
        Sample {
            at_ns: (secs * S as f64) as i64,
            usage_ns: usage_ms * 1_000_000,
        }
    }

    #[test]
    fn rate_over_the_window_since_the_last_sample() {
        let mut h = History::default();
        h.record_container("c", at(0.0, 0));
        h.record_container("c", at(10.0, 5_000));
        // 1.5 s of CPU in 3 s since the sample at 10 s: half a core.
        assert_eq!(h.container_rate("c", at(13.0, 6_500)), Some(500_000_000));
    }

    #[test]
    fn a_sample_less_than_a_second_old_is_skipped_for_the_one_before() {
        let mut h = History::default();
        h.record_node(at(0.0, 0));
        h.record_node(at(10.0, 20_000));
        // 10.5 s since the sample at 0 s, in which 21 s of CPU: 2 cores.
        assert_eq!(h.node_rate(at(10.5, 21_000)), Some(2_000_000_000));
    }

    #[test]
    fn no_rate_without_an_old_enough_sample_or_after_a_reset() {
        let mut h = History::default();
        assert_eq!(h.container_rate("c", at(5.0, 1)), None);
        h.record_container("c", at(10.0, 5_000));
        assert_eq!(h.container_rate("c", at(10.5, 5_400)), None);
        assert_eq!(h.container_rate("c", at(12.0, 100)), None);
        assert_eq!(h.container_rate("other", at(12.0, 100)), None);
    }

    #[test]
    fn older_or_repeated_samples_do_not_replace_newer_ones() {
        let mut h = History::default();
        h.record_container("c", at(10.0, 5_000));
        h.record_container("c", at(9.0, 1_000));
        h.record_container("c", at(10.0, 5_000));
        assert_eq!(h.container_rate("c", at(12.0, 7_000)), Some(1_000_000_000));
    }

    #[test]
    fn gone_containers_are_forgotten() {
        let mut h = History::default();
        h.record_container("a", at(0.0, 0));
        h.record_container("b", at(0.0, 0));
        h.keep_only(&HashSet::from(["b"]));
        assert_eq!(h.container_rate("a", at(2.0, 1_000)), None);
        assert_eq!(h.container_rate("b", at(2.0, 1_000)), Some(500_000_000));
    }
}
