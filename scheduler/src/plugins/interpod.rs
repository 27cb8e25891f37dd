//! InterPodAffinity, as upstream's plugin: a Pod's required affinity and anti-affinity to the
//! Pods already in a topology domain, the required anti-affinity of those Pods to it
//! (symmetry), and the preferred terms of both sides as a score.

use super::{Reject, Topology};
use crate::affinity::{Affinity, Weighted};
use crate::node_info::{NodeInfo, PodInfo};
use std::collections::{BTreeMap, HashMap};

pub const AFFINITY_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
pub const ANTI_AFFINITY_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";
pub const EXISTING_ANTI_AFFINITY_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// The incoming Pod's terms with their namespace selectors resolved.
fn incoming_terms(
    pod: &PodInfo,
    namespaces: &HashMap<String, BTreeMap<String, String>>,
) -> Affinity {
    let mut a = pod.affinity.clone();
    for t in a.required.iter_mut().chain(a.required_anti.iter_mut()) {
        t.merge_namespaces(namespaces);
    }
    for w in a.preferred.iter_mut().chain(a.preferred_anti.iter_mut()) {
        w.term.merge_namespaces(namespaces);
    }
    a
}

/// PreFilter's counts, per topology domain: existing Pods whose required anti-affinity
/// selects the incoming Pod, and existing Pods its own required terms select.
#[derive(Clone, Debug)]
pub struct FilterState {
    terms: Affinity,
    ns_labels: Option<BTreeMap<String, String>>,
    existing_anti: Topology,
    affinity: Topology,
    anti: Topology,
    pod: std::sync::Arc<PodInfo>,
}

impl FilterState {
    /// None when nothing can fail (upstream's Skip): the Pod has no required terms and no
    /// existing Pod has required anti-affinity.
    pub fn new(
        pod: &std::sync::Arc<PodInfo>,
        nodes: &[NodeInfo],
        namespaces: &HashMap<String, BTreeMap<String, String>>,
    ) -> Option<FilterState> {
        let own = !pod.affinity.required.is_empty() || !pod.affinity.required_anti.is_empty();
        if !own && nodes.iter().all(|n| n.with_required_anti == 0) {
            return None;
        }
        let mut s = FilterState {
            terms: incoming_terms(pod, namespaces),
            ns_labels: namespaces.get(pod.namespace()).cloned(),
            existing_anti: Topology::default(),
            affinity: Topology::default(),
            anti: Topology::default(),
            pod: pod.clone(),
        };
        for node in nodes {
            if !own && node.with_required_anti == 0 {
                continue;
            }
            for p in &node.pods {
                if own {
                    s.update_own(p, node, 1);
                }
                s.update_existing(p, node, 1);
            }
        }
        Some(s)
    }

    fn update_existing(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        for t in &p.affinity.required_anti {
            if t.selects(
                self.pod.namespace(),
                self.pod.labels(),
                self.ns_labels.as_ref(),
            ) {
                self.existing_anti.add(node, &t.topology_key, by);
            }
        }
    }

    fn update_own(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        let required = &self.terms.required;
        if !required.is_empty()
            && required
                .iter()
                .all(|t| t.selects(p.namespace(), p.labels(), None))
        {
            for t in required {
                self.affinity.add(node, &t.topology_key, by);
            }
        }
        for t in &self.terms.required_anti {
            if t.selects(p.namespace(), p.labels(), None) {
                self.anti.add(node, &t.topology_key, by);
            }
        }
    }

    /// Upstream's AddPod / RemovePod: `p` counted (by 1) or no longer (by -1) on `node`,
    /// for preemption's dry runs.
    pub fn update(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        self.update_existing(p, node, by);
        self.update_own(p, node, by);
    }

    pub fn filter(&self, node: &NodeInfo) -> Result<(), Reject> {
        let labels = node.labels();
        if !self.satisfies_affinity(labels) {
            return Err(Reject::unresolvable(AFFINITY_NOT_MATCH));
        }
        let anti_hit = self.terms.required_anti.iter().any(|t| {
            labels
                .get(&t.topology_key)
                .is_some_and(|v| self.anti.get(&t.topology_key, v) > 0)
        });
        if anti_hit {
            return Err(Reject::unschedulable(ANTI_AFFINITY_NOT_MATCH));
        }
        if self.existing_anti.any_for(labels) {
            return Err(Reject::unschedulable(EXISTING_ANTI_AFFINITY_NOT_MATCH));
        }
        Ok(())
    }

    fn satisfies_affinity(&self, labels: &BTreeMap<String, String>) -> bool {
        let mut pods_exist = true;
        for t in &self.terms.required {
            match labels.get(&t.topology_key) {
                // Every topology key must be on the node.
                None => return false,
                Some(v) => pods_exist &= self.affinity.get(&t.topology_key, v) > 0,
            }
        }
        // The first of a group of Pods with affinity to each other: when no Pod anywhere
        // matches and the Pod matches its own terms, it may go to any node with the keys.
        pods_exist
            || (self.affinity.is_empty()
                && self
                    .terms
                    .required
                    .iter()
                    .all(|t| t.selects(self.pod.namespace(), self.pod.labels(), None)))
    }
}

/// Adds `by` times the weight of each of `terms` that selects `target` (a Pod, and the labels
/// of its namespace) to that term's domain of `node`.
fn add_weights(
    scores: &mut Topology,
    terms: &[Weighted],
    target: (&PodInfo, Option<&BTreeMap<String, String>>),
    node: &NodeInfo,
    by: i64,
) {
    for w in terms {
        if w.term
            .selects(target.0.namespace(), target.0.labels(), target.1)
        {
            scores.add(node, &w.term.topology_key, by * w.weight);
        }
    }
}

/// PreScore's sums: per topology domain, the weights of preferred terms (both ways) and of
/// existing Pods' required affinity to the incoming Pod (hardPodAffinityWeight).
#[derive(Clone, Debug)]
pub struct ScoreState {
    terms: Affinity,
    ns_labels: Option<BTreeMap<String, String>>,
    hard_weight: i64,
    pod: std::sync::Arc<PodInfo>,
    scores: Topology,
}

impl ScoreState {
    /// Empty (every node scores 0, upstream's Skip) when no term applies anywhere.
    pub fn new(
        pod: &std::sync::Arc<PodInfo>,
        nodes: &[NodeInfo],
        namespaces: &HashMap<String, BTreeMap<String, String>>,
        hard_weight: i64,
    ) -> ScoreState {
        let own = !pod.affinity.preferred.is_empty() || !pod.affinity.preferred_anti.is_empty();
        let mut s = ScoreState {
            terms: incoming_terms(pod, namespaces),
            ns_labels: namespaces.get(pod.namespace()).cloned(),
            hard_weight,
            pod: pod.clone(),
            scores: Topology::default(),
        };
        for node in nodes {
            if (!own && node.with_affinity == 0) || node.labels().is_empty() {
                continue;
            }
            for p in &node.pods {
                if own || !p.affinity.is_empty() {
                    s.update(p, node, 1);
                }
            }
        }
        s
    }

    /// `p` counted on `node` (by 1) or no longer (by -1): the weights of its terms that
    /// select the incoming Pod, and of the incoming Pod's terms that select it.
    pub fn update(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        let scores = &mut self.scores;
        add_weights(scores, &self.terms.preferred, (p, None), node, by);
        add_weights(scores, &self.terms.preferred_anti, (p, None), node, -by);
        let incoming = (self.pod.as_ref(), self.ns_labels.as_ref());
        if self.hard_weight > 0 {
            for t in &p.affinity.required {
                if t.selects(incoming.0.namespace(), incoming.0.labels(), incoming.1) {
                    scores.add(node, &t.topology_key, by * self.hard_weight);
                }
            }
        }
        add_weights(scores, &p.affinity.preferred, incoming, node, by);
        add_weights(scores, &p.affinity.preferred_anti, incoming, node, -by);
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, node: &NodeInfo) -> i64 {
        self.scores.sum_for(node.labels())
    }

    /// Upstream's NormalizeScore: min to 0, max to 100, linearly.
    pub fn normalize(scores: &mut [i64]) {
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return;
        };
        for s in scores.iter_mut() {
            *s = if max > min {
                (100.0 * ((*s - min) as f64 / (max - min) as f64)) as i64
            } else {
                0
            };
        }
    }
}
