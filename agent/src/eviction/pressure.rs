//! From one observation to the next: which thresholds are met (a soft one only past its grace
//! period; one being reclaimed until its minimum reclaim is back too), and the node's pressure
//! conditions, which stay for the pressure transition period after the last threshold of theirs
//! was met (so a node at the edge does not flap). Pure: time comes in as `now`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::thresholds::{is_met, Observations, Signal, Threshold};

/// The pressure conditions that are True now (MemoryPressure, DiskPressure, PIDPressure).
pub type PressureConditions = tokio::sync::watch::Receiver<BTreeSet<&'static str>>;

pub struct Pressure {
    transition: Duration,
    /// When each met threshold (by index) was first seen met, for soft grace periods.
    first_met: BTreeMap<usize, Instant>,
    /// When each condition last had a threshold met.
    condition_seen: BTreeMap<&'static str, Instant>,
    /// Thresholds acted on at the last update: met until their minimum reclaim is back.
    acting: BTreeSet<usize>,
}

/// What one update decides.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    /// Pressure conditions that are True (MemoryPressure, DiskPressure, PIDPressure).
    pub conditions: BTreeSet<&'static str>,
    /// Thresholds to evict for, by index, most urgent first (memory, then disk, then pids).
    pub act_on: Vec<usize>,
}

impl Pressure {
    pub fn new(transition: Duration) -> Self {
        Pressure {
            transition,
            first_met: BTreeMap::new(),
            condition_seen: BTreeMap::new(),
            acting: BTreeSet::new(),
        }
    }

    pub fn update(
        &mut self,
        thresholds: &[Threshold],
        observed: &Observations,
        now: Instant,
    ) -> Verdict {
        let mut met: BTreeMap<usize, &Threshold> = BTreeMap::new();
        for (i, t) in thresholds.iter().enumerate() {
            let Some(o) = observed.get(&t.signal) else {
                continue;
            };
            // A threshold being reclaimed holds until the minimum reclaim is free as well.
            let extra = match (&t.min_reclaim, self.acting.contains(&i)) {
                (Some(r), true) => r.amount(o.capacity),
                _ => 0,
            };
            if is_met(t, o, extra) {
                met.insert(i, t);
            }
        }
        self.first_met.retain(|i, _| met.contains_key(i));
        for (&i, t) in &met {
            self.first_met.entry(i).or_insert(now);
            self.condition_seen.insert(t.signal.condition(), now);
        }
        let transition = self.transition;
        self.condition_seen
            .retain(|_, seen| now.duration_since(*seen) <= transition);
        let mut due: Vec<(usize, &Threshold)> = met
            .into_iter()
            .filter(|(i, t)| {
                let since = self.first_met.get(i).copied().unwrap_or(now);
                t.grace.is_none_or(|g| now.duration_since(since) >= g)
            })
            .collect();
        due.sort_by_key(|(_, t)| urgency(t.signal));
        let act_on: Vec<usize> = due.into_iter().map(|(i, _)| i).collect();
        self.acting = act_on.iter().copied().collect();
        Verdict {
            conditions: self.condition_seen.keys().copied().collect(),
            act_on,
        }
    }
}

/// Memory first, as the kubelet orders its thresholds for eviction.
fn urgency(s: Signal) -> u8 {
    match s {
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => 0,
        Signal::NodeFsAvailable | Signal::NodeFsInodesFree => 1,
        Signal::ImageFsAvailable | Signal::ImageFsInodesFree => 2,
        Signal::PidAvailable => 3,
    }
}
