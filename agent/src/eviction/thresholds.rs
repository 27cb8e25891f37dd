//! Eviction thresholds as the kubelet takes them (`--eviction-hard`, `--eviction-soft`,
//! `--eviction-soft-grace-period`, `--eviction-minimum-reclaim`), and which of them the node's
//! observations meet. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::quantity;

/// The signals the agent observes (the kubelet's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    AllocatableMemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 7] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    fn parse(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The node condition a met threshold of this signal sets.
    pub fn condition(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "MemoryPressure",
            Signal::PidAvailable => "PIDPressure",
            _ => "DiskPressure",
        }
    }

    /// The resource the kubelet names in an eviction message for this signal.
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }
}

/// A threshold's value: an absolute quantity, or a share of the signal's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Quantity { amount: u64, text: String },
    Percent(f64),
}

impl Value {
    fn parse(text: &str) -> Result<Value, String> {
        if let Some(p) = text.strip_suffix('%') {
            let p: f64 = p
                .parse()
                .map_err(|_| format!("invalid percentage {text:?}"))?;
            if !(0.0..=100.0).contains(&p) {
                return Err(format!("percentage {text:?} must be between 0% and 100%"));
            }
            return Ok(Value::Percent(p / 100.0));
        }
        let amount = quantity::bytes(text)
            .and_then(|b| u64::try_from(b).ok())
            .ok_or_else(|| format!("invalid quantity {text:?}"))?;
        Ok(Value::Quantity {
            amount,
            text: text.to_string(),
        })
    }

    /// The amount this value stands for, given the signal's capacity.
    pub fn amount(&self, capacity: u64) -> u64 {
        match self {
            Value::Quantity { amount, .. } => *amount,
            Value::Percent(p) => (capacity as f64 * p) as u64,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: Value,
    /// Soft thresholds only: how long the signal must stay past it before pods are evicted.
    pub grace: Option<Duration>,
    /// How much past the threshold to reclaim once evicting.
    pub min_reclaim: Option<Value>,
}

/// The kubelet's defaults on Linux.
pub const DEFAULT_HARD: &str =
    "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%";

/// Parses "signal<value,..." (an empty text: none).
fn parse_list(text: &str) -> Result<BTreeMap<Signal, Value>, String> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item.split_once('<').ok_or_else(|| {
            format!("{item:?}: expected signal<value, such as memory.available<100Mi")
        })?;
        let signal = Signal::parse(name.trim())
            .ok_or_else(|| format!("{item:?}: unknown eviction signal {name:?}"))?;
        if out.insert(signal, Value::parse(value.trim())?).is_some() {
            return Err(format!("{item:?}: {name} given twice"));
        }
    }
    Ok(out)
}

/// Parses "signal=value,..." (grace periods as durations such as 90s or 1m30s, or reclaims).
fn parse_pairs(text: &str) -> Result<BTreeMap<Signal, String>, String> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected signal=value"))?;
        let signal = Signal::parse(name.trim())
            .ok_or_else(|| format!("{item:?}: unknown eviction signal {name:?}"))?;
        out.insert(signal, value.trim().to_string());
    }
    Ok(out)
}

/// What the eviction flags say, checked as the kubelet checks them at start.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub hard: String,
    pub soft: String,
    pub soft_grace: String,
    pub min_reclaim: String,
}

pub fn parse(flags: &Flags) -> Result<Vec<Threshold>, String> {
    let mut reclaims = BTreeMap::new();
    for (signal, v) in parse_pairs(&flags.min_reclaim)? {
        reclaims.insert(signal, Value::parse(&v)?);
    }
    let graces = parse_pairs(&flags.soft_grace)?;
    let mut out = Vec::new();
    for (signal, value) in parse_list(&flags.hard)? {
        out.push(Threshold {
            signal,
            value,
            grace: None,
            min_reclaim: reclaims.get(&signal).cloned(),
        });
    }
    for (signal, value) in parse_list(&flags.soft)? {
        let grace = graces.get(&signal).ok_or_else(|| {
            format!(
                "--eviction-soft {}: needs a grace period in --eviction-soft-grace-period",
                signal.name()
            )
        })?;
        let grace = keelson_apimachinery::parse_duration(grace).map_err(|e| {
            format!(
                "--eviction-soft-grace-period {}={grace}: {e}",
                signal.name()
            )
        })?;
        out.push(Threshold {
            signal,
            value,
            grace: Some(grace),
            min_reclaim: reclaims.get(&signal).cloned(),
        });
    }
    if let Some(extra) = graces
        .keys()
        .find(|s| !out.iter().any(|t| t.grace.is_some() && t.signal == **s))
    {
        return Err(format!(
            "--eviction-soft-grace-period {}: no --eviction-soft threshold for it",
            extra.name()
        ));
    }
    Ok(out)
}

/// One signal as observed: what is available, of what capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

pub type Observations = BTreeMap<Signal, Observation>;

/// Whether the observation is past the threshold (less available than its amount), with
/// `extra` more asked for (the minimum reclaim, once evicting).
pub fn is_met(t: &Threshold, o: &Observation, extra: u64) -> bool {
    o.available < t.value.amount(o.capacity).saturating_add(extra)
}

/// The thresholds met now (observed signals only).
pub fn met<'a>(thresholds: &'a [Threshold], observed: &Observations) -> Vec<&'a Threshold> {
    thresholds
        .iter()
        .filter(|t| observed.get(&t.signal).is_some_and(|o| is_met(t, o, 0)))
        .collect()
}
