//! Node health from heartbeats: a node whose Lease (and Ready heartbeat) has not changed for the
//! grace period gets every condition Unknown, and each node carries the NoExecute taint that
//! matches its Ready condition (unreachable for Unknown, not-ready for False), and the NoSchedule
//! taints of its conditions (upstream's TaintNodesByCondition: not-ready, unreachable,
//! memory-pressure, disk-pressure, pid-pressure, network-unavailable, unschedulable). Pure.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use keelson_apimachinery::well_known::{
    DISK_PRESSURE_TAINT, MEMORY_PRESSURE_TAINT, NETWORK_UNAVAILABLE_TAINT, NOT_READY_TAINT,
    PID_PRESSURE_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT,
};
use std::collections::HashMap;
use std::time::Duration;

pub const UNKNOWN_REASON: &str = "NodeStatusUnknown";
pub const UNKNOWN_MESSAGE: &str = "Kubelet stopped posting node status.";
pub const NEVER_REASON: &str = "NodeStatusNeverUpdated";
pub const NEVER_MESSAGE: &str = "Kubelet never posted node status.";

/// What the controller last saw of each node's heartbeats and when it saw them change, by its
/// own clock: nodes' clocks may differ from ours, so staleness is measured from our observation
/// of a change (upstream's probeTimestamp), not from the renewTime the node wrote.
#[derive(Default)]
pub struct Probes(HashMap<String, Probe>);

struct Probe {
    heartbeat: Heartbeat,
    changed_at: Timestamp,
}

/// A node's heartbeats: its Lease's renewTime and its Ready condition's lastHeartbeatTime.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Heartbeat {
    pub lease_renewed: Option<Timestamp>,
    pub ready_heartbeat: Option<Timestamp>,
}

impl Probes {
    /// Records `node`'s heartbeats seen `now`; returns when they last changed (now for a node
    /// seen for the first time, which so gets a full grace period).
    pub fn observe(&mut self, node: &str, heartbeat: Heartbeat, now: Timestamp) -> Timestamp {
        let probe = self.0.entry(node.to_string()).or_insert(Probe {
            heartbeat: heartbeat.clone(),
            changed_at: now,
        });
        if probe.heartbeat != heartbeat {
            probe.heartbeat = heartbeat;
            probe.changed_at = now;
        }
        probe.changed_at
    }

    /// Forgets nodes that no longer exist.
    pub fn retain(&mut self, exists: impl Fn(&str) -> bool) {
        self.0.retain(|name, _| exists(name));
    }
}

/// The Ready condition's lastHeartbeatTime, if the node posted one.
pub fn ready_heartbeat(node: &Node) -> Option<Timestamp> {
    condition(node, "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0)
}

fn condition<'a>(node: &'a Node, kind: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// What to write to one node; None where nothing changes.
#[derive(Debug, Default, PartialEq)]
pub struct NodeUpdate {
    /// The whole status.conditions list.
    pub conditions: Option<Vec<NodeCondition>>,
    /// The whole spec.taints list.
    pub taints: Option<Vec<Taint>>,
}

/// Decides `node`'s conditions and taints, given when its heartbeats last changed.
pub fn plan(node: &Node, last_change: Timestamp, now: Timestamp, grace: Duration) -> NodeUpdate {
    let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
    let stale = now.duration_since(last_change) > grace;
    let conditions = stale.then(|| mark_unknown(node, now)).flatten();
    let ready = match &conditions {
        Some(cs) => cs
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str()),
        None => condition(node, "Ready").map(|c| c.status.as_str()),
    };
    let wanted = match ready {
        Some("False") => Some(NOT_READY_TAINT),
        Some("Unknown") => Some(UNREACHABLE_TAINT),
        _ => None,
    };
    let cs = conditions
        .as_deref()
        .or_else(|| node.status.as_ref().and_then(|s| s.conditions.as_deref()));
    let no_schedule = condition_taints(node, cs.unwrap_or_default());
    let with_health = taints_with(node, wanted, now);
    let current = with_health.clone().unwrap_or_else(|| current_taints(node));
    let taints = with_no_schedule(&current, &no_schedule, now).or(with_health);
    NodeUpdate { taints, conditions }
}

/// The NoSchedule taint keys the node's conditions (and spec.unschedulable) call for.
fn condition_taints(node: &Node, conditions: &[NodeCondition]) -> Vec<&'static str> {
    let status = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == kind)
            .map(|c| c.status.as_str())
    };
    let mut keys = Vec::new();
    match status("Ready") {
        Some("False") => keys.push(NOT_READY_TAINT),
        Some("Unknown") => keys.push(UNREACHABLE_TAINT),
        _ => {}
    }
    for (kind, key) in [
        ("MemoryPressure", MEMORY_PRESSURE_TAINT),
        ("DiskPressure", DISK_PRESSURE_TAINT),
        ("PIDPressure", PID_PRESSURE_TAINT),
        ("NetworkUnavailable", NETWORK_UNAVAILABLE_TAINT),
    ] {
        if status(kind) == Some("True") {
            keys.push(key);
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        keys.push(UNSCHEDULABLE_TAINT);
    }
    keys
}

const CONDITION_TAINTS: [&str; 7] = [
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    MEMORY_PRESSURE_TAINT,
    DISK_PRESSURE_TAINT,
    PID_PRESSURE_TAINT,
    NETWORK_UNAVAILABLE_TAINT,
    UNSCHEDULABLE_TAINT,
];

fn is_condition_taint(t: &Taint) -> bool {
    t.effect == "NoSchedule" && CONDITION_TAINTS.contains(&t.key.as_str())
}

/// `current` with exactly the `wanted` condition NoSchedule taints (others' taints stay); None
/// when that is what it has.
fn with_no_schedule(current: &[Taint], wanted: &[&str], now: Timestamp) -> Option<Vec<Taint>> {
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !is_condition_taint(t) || wanted.contains(&t.key.as_str()))
        .cloned()
        .collect();
    for key in wanted {
        if !taints
            .iter()
            .any(|t| is_condition_taint(t) && t.key == *key)
        {
            taints.push(Taint {
                key: key.to_string(),
                effect: "NoSchedule".into(),
                time_added: Some(Time(now)),
                value: None,
            });
        }
    }
    (taints != current).then_some(taints)
}

fn current_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// Every condition Unknown (and Ready added when the node never posted it); None when they
/// already are. Heartbeat times stay: they tell when the node was last heard from.
fn mark_unknown(node: &Node, now: Timestamp) -> Option<Vec<NodeCondition>> {
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for c in conditions.iter_mut().filter(|c| c.status != "Unknown") {
        c.status = "Unknown".into();
        c.reason = Some(UNKNOWN_REASON.into());
        c.message = Some(UNKNOWN_MESSAGE.into());
        c.last_transition_time = Some(Time(now));
        changed = true;
    }
    if !conditions.iter().any(|c| c.type_ == "Ready") {
        conditions.push(NodeCondition {
            type_: "Ready".into(),
            status: "Unknown".into(),
            reason: Some(NEVER_REASON.into()),
            message: Some(NEVER_MESSAGE.into()),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        });
        changed = true;
    }
    changed.then_some(conditions)
}

fn is_health_taint(t: &Taint) -> bool {
    t.effect == "NoExecute" && (t.key == NOT_READY_TAINT || t.key == UNREACHABLE_TAINT)
}

/// The node's taints with exactly the `wanted` health taint (the one present keeps its
/// timeAdded, which eviction deadlines count from); None when that is what it has.
fn taints_with(node: &Node, wanted: Option<&str>, now: Timestamp) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let mut taints: Vec<Taint> = current
        .iter()
        .filter(|t| !is_health_taint(t) || Some(t.key.as_str()) == wanted)
        .cloned()
        .collect();
    if let Some(key) = wanted {
        if !taints.iter().any(|t| is_health_taint(t) && t.key == key) {
            taints.push(Taint {
                key: key.into(),
                effect: "NoExecute".into(),
                time_added: Some(Time(now)),
                value: None,
            });
        }
    }
    (taints != current).then_some(taints)
}

#[cfg(test)]
mod tests;
