//! What a DaemonSet needs, given the nodes and the pods it owns: a pod on each node that should
//! run one, none elsewhere, old pods replaced within maxUnavailable, and the status counts.
//! Pure.

use super::pod::{should_run, spec_with_tolerations};
use crate::deployment::scaled;
use crate::pods::{is_active, is_available, is_ready};
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::CONTROLLER_REVISION_HASH_LABEL;
use kube::ResourceExt;
use std::collections::BTreeMap;

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes that get a new pod.
    pub create: Vec<String>,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    pub status: DaemonSetStatus,
}

/// The inputs every decision about one DaemonSet shares.
pub struct Inputs<'a> {
    pub ds: &'a DaemonSet,
    /// The template's spec with the automatic tolerations (what new pods get).
    pub spec: PodSpec,
    /// The template's hash (the controller-revision-hash of up-to-date pods).
    pub hash: String,
    pub now: Timestamp,
}

impl<'a> Inputs<'a> {
    pub fn new(ds: &'a DaemonSet, now: Timestamp) -> Inputs<'a> {
        let template = &ds.spec.template;
        let spec = template.spec.clone().unwrap_or_default();
        let json = serde_json::to_value(template).unwrap_or_default();
        Inputs {
            ds,
            spec: spec_with_tolerations(&spec),
            hash: crate::deployment::template_hash(&json),
            now,
        }
    }

    fn updated(&self, pod: &Pod) -> bool {
        pod.labels().get(CONTROLLER_REVISION_HASH_LABEL) == Some(&self.hash)
    }

    /// Ready for at least minReadySeconds.
    fn available(&self, pod: &Pod) -> bool {
        is_available(pod, self.ds.spec.min_ready_seconds.unwrap_or(0), self.now)
    }
}

/// Decides for `ds` (as `inputs`) over `nodes`, given the pods it controls.
pub fn plan(inputs: &Inputs, nodes: &[&Node], pods: &[Pod]) -> Plan {
    let mut out = Plan::default();
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            // A failed daemon is deleted so that a fresh one replaces it.
            Some(node) if is_active(pod) => by_node.entry(node).or_default().push(pod),
            _ => out.delete.push(pod.name_any()),
        }
    }
    let mut old: Vec<(&Pod, bool)> = Vec::new();
    let status = &mut out.status;
    for node in nodes {
        let mut mine = by_node.remove(node.name_any().as_str()).unwrap_or_default();
        if !should_run(&inputs.spec, node) {
            status.number_misscheduled += i32::from(!mine.is_empty());
            out.delete.extend(mine.iter().map(|p| p.name_any()));
            continue;
        }
        status.desired_number_scheduled += 1;
        // Keep one: an up-to-date one first, then the oldest.
        mine.sort_by_key(|p| (!inputs.updated(p), p.creation_timestamp().map(|t| t.0)));
        let Some((pod, extra)) = mine.split_first() else {
            out.create.push(node.name_any());
            continue;
        };
        out.delete.extend(extra.iter().map(|p| p.name_any()));
        let available = inputs.available(pod);
        status.current_number_scheduled += 1;
        status.number_ready += i32::from(is_ready(pod));
        *status.number_available.get_or_insert(0) += i32::from(available);
        *status.updated_number_scheduled.get_or_insert(0) += i32::from(inputs.updated(pod));
        if !inputs.updated(pod) {
            old.push((pod, available));
        }
    }
    // Pods on nodes that no longer exist.
    out.delete
        .extend(by_node.values().flatten().map(|p| p.name_any()));
    let available = status.number_available.unwrap_or(0);
    status.number_available = Some(available);
    status.updated_number_scheduled = Some(status.updated_number_scheduled.unwrap_or(0));
    status.number_unavailable = Some(status.desired_number_scheduled - available);
    status.observed_generation = inputs.ds.metadata.generation;
    let (desired, unavailable) = (
        status.desired_number_scheduled,
        status.desired_number_scheduled - available,
    );
    out.delete
        .extend(rolling(inputs.ds, desired, unavailable, &old));
    out
}

/// The old pods a RollingUpdate deletes now (their nodes get the new pod on a later pass):
/// unavailable ones at once, available ones while fewer than maxUnavailable nodes are down.
/// OnDelete replaces only pods the user deleted.
fn rolling(ds: &DaemonSet, desired: i32, unavailable: i32, old: &[(&Pod, bool)]) -> Vec<String> {
    let strategy = ds.spec.update_strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return Vec::new();
    }
    let max = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.as_ref());
    // As upstream: a percentage rounds up, and 0 (no surge either) still lets one go.
    let max_unavailable = match max {
        None => 1,
        Some(m) => scaled(Some(m), desired, 0, true).max(1),
    };
    let mut budget = max_unavailable - unavailable;
    let mut delete = Vec::new();
    for (pod, available) in old {
        if !available {
            delete.push(pod.name_any());
        } else if budget > 0 {
            budget -= 1;
            delete.push(pod.name_any());
        }
    }
    delete
}

#[cfg(test)]
mod tests;
