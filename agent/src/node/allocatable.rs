//! The node's allocatable resources as the kubelet computes them: capacity less
//! `--kube-reserved`, `--system-reserved` and the hard eviction thresholds (memory.available
//! from memory, nodefs.available from ephemeral-storage). Pure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::eviction::{Signal, Threshold};
use crate::quantity;

/// Resources set aside, in the kubelet's units: cpu in millicores, the others in bytes or counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reserved(pub BTreeMap<String, i128>);

const RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

impl Reserved {
    /// Parses "cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000".
    pub fn parse(text: &str) -> Result<Reserved, String> {
        let mut out = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected resource=quantity"))?;
            if !RESOURCES.contains(&name) {
                return Err(format!(
                    "{item:?}: only {} may be reserved",
                    RESOURCES.join(", ")
                ));
            }
            let milli = quantity::parse_milli(value)
                .filter(|m| *m >= 0)
                .ok_or_else(|| format!("{item:?}: {value:?} is not a quantity"))?;
            let amount = if name == "cpu" {
                milli
            } else {
                (milli + 999) / 1000
            };
            out.insert(name.to_string(), amount);
        }
        Ok(Reserved(out))
    }

    /// Both reservations together.
    pub fn plus(&self, other: &Reserved) -> Reserved {
        let mut out = self.0.clone();
        for (k, v) in &other.0 {
            *out.entry(k.clone()).or_default() += v;
        }
        Reserved(out)
    }
}

fn amount(q: &Quantity, cpu: bool) -> Option<i128> {
    let milli = quantity::parse_milli(&q.0)?;
    Some(if cpu { milli } else { milli / 1000 })
}

/// Capacity less what is reserved and the hard eviction thresholds, never below zero.
pub fn allocatable(
    capacity: &BTreeMap<String, Quantity>,
    reserved: &Reserved,
    hard: &[Threshold],
) -> BTreeMap<String, Quantity> {
    let threshold = |signal: Signal, capacity: i128| -> i128 {
        hard.iter()
            .find(|t| t.signal == signal && t.grace.is_none())
            .map_or(0, |t| {
                i128::from(t.value.amount(u64::try_from(capacity).unwrap_or(0)))
            })
    };
    capacity
        .iter()
        .map(|(name, q)| {
            let cpu = name == "cpu";
            let Some(total) = amount(q, cpu) else {
                return (name.clone(), q.clone());
            };
            let mut left = total - reserved.0.get(name).copied().unwrap_or(0);
            match name.as_str() {
                "memory" => left -= threshold(Signal::MemoryAvailable, total),
                "ephemeral-storage" => left -= threshold(Signal::NodeFsAvailable, total),
                _ => {}
            }
            let left = left.max(0);
            let text = match name.as_str() {
                "cpu" => quantity::format_milli(left, false),
                "memory" | "ephemeral-storage" => format!("{}Ki", left / 1024),
                _ => left.to_string(),
            };
            (name.clone(), Quantity(text))
        })
        .collect()
}

/// Memory the pods may use: capacity less what is reserved (allocatableMemory.available's
/// capacity; the hard threshold is the signal's own).
pub fn pods_memory(capacity: &BTreeMap<String, Quantity>, reserved: &Reserved) -> Option<u64> {
    let total = amount(capacity.get("memory")?, false)?;
    let left = total - reserved.0.get("memory").copied().unwrap_or(0);
    u64::try_from(left.max(0)).ok()
}
