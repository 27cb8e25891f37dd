//! Preemption, as upstream's DefaultPreemption (simplified: victims come from one node): when a
//! Pod fits nowhere, find per node the fewest lower-priority Pods whose removal lets it fit,
//! sparing those a PodDisruptionBudget protects where possible, then pick the node whose
//! victims matter least. Pure: the caller deletes the victims.

use crate::node_info::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use keelson_apimachinery::labels::LabelSelector;
use std::cmp::{Ordering, Reverse};
use std::sync::Arc;

/// spec.priority, which the Priority admission plugin resolves from priorityClassName;
/// absent means 0, as upstream's PodPriority.
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Pending Pods in upstream's PrioritySort order: higher priority first, then the one that
/// has waited longest (creation time stands in for the time it joined the queue).
pub fn queue_order(a: &Pod, b: &Pod) -> Ordering {
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    priority(b)
        .cmp(&priority(a))
        .then_with(|| created(a).cmp(&created(b)))
}

/// Why `pod` may not preempt at all, in upstream's words; None when it may.
pub fn not_eligible(pod: &Pod) -> Option<&'static str> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref());
    (policy == Some("Never")).then_some("not eligible due to preemptionPolicy=Never.")
}

/// Upstream's MoreImportantPod: higher priority, then started earlier (never started counts
/// as starting now, i.e. last).
fn more_important(a: &Pod, b: &Pod) -> Ordering {
    let started = |p: &Pod| {
        Reverse(
            p.status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| Reverse(t.0)),
        )
    };
    priority(b)
        .cmp(&priority(a))
        .then_with(|| started(a).cmp(&started(b)))
}

/// A PodDisruptionBudget as preemption reads it.
pub struct Budget {
    namespace: String,
    selector: LabelSelector,
    allowed: i32,
    /// Pods whose eviction the API server already granted (status.disruptedPods): removing
    /// them again costs the budget nothing.
    disrupted: Vec<String>,
}

impl Budget {
    /// None for a budget that selects nothing (upstream skips a nil or empty selector).
    pub fn new(pdb: &PodDisruptionBudget) -> Option<Budget> {
        let sel = serde_json::to_value(pdb.spec.as_ref()?.selector.as_ref()?).ok()?;
        let selector = LabelSelector::from_json(&sel).ok()?;
        if selector.is_everything() || selector.is_nothing() {
            return None;
        }
        let status = pdb.status.as_ref();
        Some(Budget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            selector,
            allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        })
    }

    fn covers(&self, pod: &Pod) -> bool {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        pod.metadata.namespace.as_deref().unwrap_or_default() == self.namespace
            && pod
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| !l.is_empty() && self.selector.matches_map(l))
            && !self.disrupted.iter().any(|d| d == name)
    }
}

/// Whether evicting each of `pods` (most important first) breaks a budget: each covered Pod
/// uses up one allowed disruption of every budget covering it, as upstream counts.
fn violations(pods: &[Arc<PodInfo>], budgets: &[Budget]) -> Vec<bool> {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
    pods.iter()
        .map(|p| {
            let mut violated = false;
            for (b, left) in budgets.iter().zip(allowed.iter_mut()) {
                if b.covers(&p.pod) {
                    *left -= 1;
                    violated |= *left < 0;
                }
            }
            violated
        })
        .collect()
}

/// The Pods to remove from one node so that the preemptor fits there.
#[derive(Debug)]
pub struct Victims {
    /// Most important first.
    pub pods: Vec<Arc<PodInfo>>,
    /// How many of them a PodDisruptionBudget protects.
    pub pdb_violations: usize,
}

/// Upstream's selectVictimsOnNode: remove every Pod of lower priority than `preemptor` from
/// `info`, check that it fits, then give Pods back, most important first and budget-protected
/// ones before the rest, while it still fits. `fits` runs the filters against a changed node
/// (affinity and spreading included, counted without the Pods taken off). None when even
/// removing them all is not enough.
pub fn select_victims(
    preemptor: &Pod,
    info: &NodeInfo,
    budgets: &[Budget],
    fits: &dyn Fn(&NodeInfo) -> bool,
) -> Option<Victims> {
    let floor = priority(preemptor);
    let mut potential: Vec<Arc<PodInfo>> = info
        .pods
        .iter()
        .filter(|p| priority(&p.pod) < floor)
        .cloned()
        .collect();
    if potential.is_empty() {
        return None;
    }
    let mut trial = info.clone();
    for p in &potential {
        trial.remove(p);
    }
    if !fits(&trial) {
        return None;
    }
    potential.sort_by(|a, b| more_important(&a.pod, &b.pod));
    let violates = violations(&potential, budgets);
    // Budget-protected Pods are offered back first, so they are the last to be evicted.
    let order = (0..potential.len())
        .filter(|i| violates[*i])
        .chain((0..potential.len()).filter(|i| !violates[*i]));
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for i in order {
        let p = &potential[i];
        trial.add(p);
        if !fits(&trial) {
            trial.remove(p);
            victims.push(p.clone());
            pdb_violations += usize::from(violates[i]);
        }
    }
    if victims.is_empty() {
        // It fits as the node is: not a preemption (the filters disagree with the dry run).
        return None;
    }
    victims.sort_by(|a, b| more_important(&a.pod, &b.pod));
    Some(Victims {
        pods: victims,
        pdb_violations,
    })
}

/// Upstream's pickOneNodeForPreemption (its first four rules): fewest budget violations,
/// then the lowest most-important victim, then the smallest sum of priorities, then the
/// fewest victims; the first such candidate. Returns its index in `candidates`.
pub fn pick_node(candidates: &[Victims]) -> Option<usize> {
    let key = |v: &Victims| {
        let top = v.pods.first().map_or(i32::MIN, |p| priority(&p.pod));
        // Offset by 2^31 as upstream, so that negative priorities still add up to less.
        let sum: i64 = v
            .pods
            .iter()
            .map(|p| i64::from(priority(&p.pod)) + i64::from(i32::MAX) + 1)
            .sum();
        (v.pdb_violations, top, sum, v.pods.len())
    };
    (0..candidates.len()).min_by_key(|i| key(&candidates[*i]))
}

/// Upstream's dry run: victims on each node in `could_help` (where the filters failed for
/// room that evictions can free), then the node to preempt on, as an index into `infos`.
/// `fits(i, trial)`: whether the preemptor fits node `i` changed into `trial`.
pub fn find(
    preemptor: &Pod,
    could_help: &[usize],
    infos: &[NodeInfo],
    budgets: &[Budget],
    fits: &dyn Fn(usize, &NodeInfo) -> bool,
) -> Option<(usize, Victims)> {
    let mut nodes = Vec::new();
    let mut candidates = Vec::new();
    for &i in could_help {
        if let Some(v) = select_victims(preemptor, &infos[i], budgets, &|t| fits(i, t)) {
            nodes.push(i);
            candidates.push(v);
        }
    }
    let best = pick_node(&candidates)?;
    Some((nodes[best], candidates.swap_remove(best)))
}

#[cfg(test)]
#[path = "preemption_tests.rs"]
mod tests;
