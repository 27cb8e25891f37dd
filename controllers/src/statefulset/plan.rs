//! What a StatefulSet does next, given the pods it owns, as upstream's stateful_set_control:
//! missing ordinals created (in order with OrderedReady, each Running and Ready before the next;
//! all at once with Parallel), ordinals past `replicas` deleted from the highest, failed pods
//! replaced, and with RollingUpdate the highest ordinal at or above the partition that is not of
//! the update revision deleted (one at a time, each replacement healthy before the next). Pure.

use super::identity::{ordinal_of, start_ordinal};
use crate::pods::{is_available, is_ready};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::CONTROLLER_REVISION_HASH_LABEL;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The set and the names of its current and update revisions.
pub struct Inputs<'a> {
    pub sts: &'a StatefulSet,
    /// The revision most pods run (status.currentRevision while it exists).
    pub current: &'a str,
    /// The revision of the set's template now.
    pub update: &'a str,
    pub now: Timestamp,
}

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Ordinals that get a pod now, each with whether it is made from the update revision
    /// (false: the current one, for ordinals below the partition).
    pub create: Vec<(i32, bool)>,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// Ordinals whose claims must exist (pods being created or running).
    pub claims: Vec<i32>,
    pub status: StatefulSetStatus,
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

fn revision(pod: &Pod) -> &str {
    pod.labels()
        .get(CONTROLLER_REVISION_HASH_LABEL)
        .map_or("", String::as_str)
}

impl Inputs<'_> {
    fn replicas(&self) -> i32 {
        self.sts.spec.replicas.unwrap_or(1).max(0)
    }

    fn monotonic(&self) -> bool {
        self.sts.spec.pod_management_policy.as_deref() != Some("Parallel")
    }

    fn running_and_ready(&self, pod: &Pod) -> bool {
        phase(pod) == "Running" && is_ready(pod)
    }

    /// Running and Ready for minReadySeconds.
    fn available(&self, pod: &Pod) -> bool {
        let min_ready = self.sts.spec.min_ready_seconds.unwrap_or(0);
        phase(pod) == "Running" && is_available(pod, min_ready, self.now)
    }

    /// What the ordered steps wait for: available and not being deleted.
    fn healthy(&self, pod: &Pod) -> bool {
        self.available(pod) && !terminating(pod)
    }

    /// Whether a new pod of `ordinal` is made from the update revision: with RollingUpdate,
    /// ordinals below the partition keep the current revision.
    fn made_from_update(&self, ordinal: i32) -> bool {
        let strategy = self.sts.spec.update_strategy.as_ref();
        if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
            return true;
        }
        let start = start_ordinal(self.sts);
        let below = match strategy.and_then(|s| s.rolling_update.as_ref()) {
            Some(r) => ordinal < start + r.partition.unwrap_or(0),
            None => {
                let current = self.sts.status.as_ref().and_then(|s| s.current_replicas);
                ordinal < start + current.unwrap_or(0)
            }
        };
        !below
    }
}

/// Decides for `inputs.sts` given the pods it controls.
pub fn plan(inputs: &Inputs, pods: &[Pod]) -> Plan {
    let set = inputs.sts.name_any();
    let start = start_ordinal(inputs.sts);
    let end = start + inputs.replicas();
    let members: BTreeMap<i32, &Pod> = pods
        .iter()
        .filter_map(|p| ordinal_of(&set, p).map(|o| (o, p)))
        .collect();
    let mut out = Plan {
        status: status(inputs, members.values().copied()),
        ..Default::default()
    };
    if inputs.sts.metadata.deletion_timestamp.is_some() {
        return out;
    }
    if !replicas(inputs, &members, start..end, &mut out) {
        return out;
    }
    let condemned: Vec<&Pod> = members
        .range(..start)
        .chain(members.range(end..))
        .rev()
        .map(|(_, p)| *p)
        .collect();
    if !scale_down(inputs, &condemned, &mut out) {
        return out;
    }
    rolling_update(inputs, &members, start..end, &mut out);
    out
}

/// The ordinals that should run: missing ones created, finished ones deleted (recreated once
/// gone). False when an OrderedReady set must wait before going on.
fn replicas(
    inputs: &Inputs,
    members: &BTreeMap<i32, &Pod>,
    ordinals: std::ops::Range<i32>,
    out: &mut Plan,
) -> bool {
    let monotonic = inputs.monotonic();
    for ordinal in ordinals {
        let Some(pod) = members.get(&ordinal) else {
            out.claims.push(ordinal);
            out.create.push((ordinal, inputs.made_from_update(ordinal)));
            if monotonic {
                return false;
            }
            continue;
        };
        if finished(pod) && !terminating(pod) {
            out.delete.push(pod.name_any());
            if monotonic {
                return false;
            }
            continue;
        }
        if !terminating(pod) {
            out.claims.push(ordinal);
        }
        if monotonic && !inputs.healthy(pod) {
            return false;
        }
    }
    true
}

/// Pods outside the ordinals, highest first: with OrderedReady one at a time, and only once it
/// is the first unhealthy pod or healthy. False when the set must wait.
fn scale_down(inputs: &Inputs, condemned: &[&Pod], out: &mut Plan) -> bool {
    let monotonic = inputs.monotonic();
    // Condemned pods come highest first, as upstream's firstUnhealthyPod walks them.
    let first_unhealthy = condemned.iter().find(|p| !inputs.healthy(p));
    for pod in condemned {
        if terminating(pod) {
            if monotonic {
                return false;
            }
            continue;
        }
        let is_first = first_unhealthy.is_some_and(|u| u.metadata.name == pod.metadata.name);
        if monotonic && !inputs.healthy(pod) && !is_first {
            return false;
        }
        out.delete.push(pod.name_any());
        if monotonic {
            return false;
        }
    }
    true
}

/// RollingUpdate: the highest ordinal at or above the partition not of the update revision is
/// deleted (recreated from the update revision on a later pass), one at a time.
fn rolling_update(
    inputs: &Inputs,
    members: &BTreeMap<i32, &Pod>,
    ordinals: std::ops::Range<i32>,
    out: &mut Plan,
) {
    let strategy = inputs.sts.spec.update_strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return;
    }
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let lowest = ordinals.start + partition.max(0);
    for ordinal in ordinals.rev().take_while(|o| *o >= lowest) {
        let Some(pod) = members.get(&ordinal) else {
            return;
        };
        if revision(pod) != inputs.update && !terminating(pod) {
            out.delete.push(pod.name_any());
            return;
        }
        if !inputs.healthy(pod) {
            return;
        }
    }
}

/// The status upstream computes from the pods: replicas that exist, ready and available ones,
/// and how many are of each revision; once every pod is of the update revision and ready, the
/// update revision becomes the current one.
fn status<'a>(inputs: &Inputs, pods: impl Iterator<Item = &'a Pod>) -> StatefulSetStatus {
    let (mut replicas, mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0, 0);
    for pod in pods {
        let created = !phase(pod).is_empty();
        replicas += i32::from(created);
        ready += i32::from(inputs.running_and_ready(pod));
        available += i32::from(inputs.available(pod));
        if created && !terminating(pod) {
            current += i32::from(revision(pod) == inputs.current);
            updated += i32::from(revision(pod) == inputs.update);
        }
    }
    let sts = inputs.sts;
    let mut status = StatefulSetStatus {
        observed_generation: sts.metadata.generation,
        replicas,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        current_replicas: Some(current),
        updated_replicas: Some(updated),
        current_revision: Some(inputs.current.to_string()),
        update_revision: Some(inputs.update.to_string()),
        collision_count: sts.status.as_ref().and_then(|s| s.collision_count),
        conditions: sts.status.as_ref().and_then(|s| s.conditions.clone()),
    };
    let rolling = sts
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        != Some("OnDelete");
    if rolling && updated == replicas && ready == replicas {
        status.current_replicas = Some(updated);
        status.current_revision = Some(inputs.update.to_string());
    }
    status
}

#[cfg(test)]
mod tests;
