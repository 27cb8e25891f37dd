//! PodTopologySpread, as upstream's plugin: DoNotSchedule constraints filter (skew against
//! the least loaded domain, minDomains), ScheduleAnyway ones score; Pods without their own
//! constraints get the cluster defaults (hostname skew 3, zone skew 5, ScheduleAnyway) over
//! the Pods of the same Services and controller.

use super::node_affinity::Required;
use super::{FastMap, Reject, Topology};
use crate::node_info::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
use keelson_apimachinery::labels::LabelSelector;
use keelson_apimachinery::taints::tolerates;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

pub const CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
pub const MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const ZONE: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Clone)]
pub struct Constraint {
    pub max_skew: i32,
    pub topology_key: String,
    /// DoNotSchedule (a filter); ScheduleAnyway only scores.
    pub hard: bool,
    pub selector: LabelSelector,
    pub min_domains: i32,
    honor_affinity: bool,
    honor_taints: bool,
}

/// A default constraint of a profile (PodTopologySpreadArgs.defaultConstraints): the selector
/// comes from the Pod's Services and controller.
#[derive(Debug, Clone, PartialEq)]
pub struct Default {
    pub max_skew: i32,
    pub topology_key: String,
    pub hard: bool,
}

/// Upstream's system defaults.
pub fn system_defaults() -> Vec<Default> {
    vec![
        Default {
            max_skew: 3,
            topology_key: HOSTNAME.into(),
            hard: false,
        },
        Default {
            max_skew: 5,
            topology_key: ZONE.into(),
            hard: false,
        },
    ]
}

impl Constraint {
    fn new(pod: &Pod, c: &TopologySpreadConstraint) -> Option<Constraint> {
        let selector = match &c.label_selector {
            None => LabelSelector::nothing(),
            Some(s) => crate::affinity::with_label_keys(
                LabelSelector::from_json(&serde_json::to_value(s).ok()?).ok()?,
                pod,
                c.match_label_keys.as_deref().unwrap_or_default(),
                &[],
            ),
        };
        Some(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            hard: c.when_unsatisfiable == "DoNotSchedule",
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        })
    }

    /// Upstream's matchNodeInclusionPolicies: nodeAffinityPolicy Honor (the default) counts
    /// only nodes the Pod may go to; nodeTaintsPolicy Honor only nodes whose taints it tolerates.
    fn includes(&self, pod: &PodInfo, required: &Required, node: &NodeInfo) -> bool {
        if self.honor_affinity && !required.matches(node) {
            return false;
        }
        if self.honor_taints {
            let tolerations = pod
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default();
            let taints = node.node.spec.as_ref().and_then(|s| s.taints.as_deref());
            let untolerated = taints.unwrap_or_default().iter().any(|t| {
                (t.effect == "NoSchedule" || t.effect == "NoExecute")
                    && !tolerations.iter().any(|tol| tolerates(tol, t))
            });
            if untolerated {
                return false;
            }
        }
        true
    }

    /// Pods on `node` this constraint counts: same namespace as the incoming Pod, selected.
    fn count(&self, namespace: &str, node: &NodeInfo) -> i64 {
        node.pods
            .iter()
            .filter(|p| p.namespace() == namespace && self.selector.matches_map(p.labels()))
            .count() as i64
    }
}

/// The Pod's constraints (its own, else the profile's defaults), and whether they are the
/// system defaults (upstream then scores nodes that miss a topology key too).
pub fn constraints(
    pod: &PodInfo,
    defaults: &[Default],
    system_defaulted: bool,
    default_selector: impl FnOnce() -> Option<LabelSelector>,
) -> (Vec<Constraint>, bool) {
    let own = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or_default();
    if !own.is_empty() {
        let cs = own
            .iter()
            .filter_map(|c| Constraint::new(&pod.pod, c))
            .collect();
        return (cs, false);
    }
    if defaults.is_empty() {
        return (Vec::new(), false);
    }
    let Some(selector) = default_selector().filter(|s| !s.is_everything()) else {
        return (Vec::new(), false);
    };
    let cs = defaults
        .iter()
        .map(|d| Constraint {
            max_skew: d.max_skew,
            topology_key: d.topology_key.clone(),
            hard: d.hard,
            selector: selector.clone(),
            min_domains: 1,
            honor_affinity: true,
            honor_taints: false,
        })
        .collect();
    (cs, system_defaulted)
}

fn has_all_keys(labels: &BTreeMap<String, String>, cs: &[Constraint]) -> bool {
    cs.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// PreFilter's counts for the DoNotSchedule constraints: matching Pods per domain.
#[derive(Clone, Debug)]
pub struct FilterState {
    constraints: Vec<Constraint>,
    /// Per constraint: Pods per domain (every eligible domain is present, 0 included).
    counts: Vec<FastMap<String, i64>>,
    /// Per constraint: the global minimum (0 with fewer domains than minDomains), kept with
    /// the counts rather than found again for every node.
    min: Vec<i64>,
    self_match: Vec<bool>,
    /// The incoming Pod and its required node affinity: which nodes count (nodeAffinityPolicy,
    /// nodeTaintsPolicy).
    pod: Arc<PodInfo>,
    required: Required,
}

impl FilterState {
    pub fn new(
        pod: &Arc<PodInfo>,
        all: &[Constraint],
        required: &Required,
        nodes: &[NodeInfo],
    ) -> Option<FilterState> {
        let constraints: Vec<Constraint> = all.iter().filter(|c| c.hard).cloned().collect();
        if constraints.is_empty() {
            return None;
        }
        let mut counts = vec![FastMap::default(); constraints.len()];
        for node in nodes {
            let labels = node.labels();
            if !has_all_keys(labels, &constraints) {
                continue;
            }
            for (c, counts) in constraints.iter().zip(counts.iter_mut()) {
                if c.includes(pod, required, node) {
                    let value = &labels[&c.topology_key];
                    let n = c.count(pod.namespace(), node);
                    match counts.get_mut(value) {
                        Some(have) => *have += n,
                        None => {
                            counts.insert(value.clone(), n);
                        }
                    }
                }
            }
        }
        let self_match = constraints
            .iter()
            .map(|c| c.selector.matches_map(pod.labels()))
            .collect();
        let mut state = FilterState {
            min: vec![0; constraints.len()],
            constraints,
            counts,
            self_match,
            pod: pod.clone(),
            required: required.clone(),
        };
        state.find_minimums();
        Some(state)
    }

    fn find_minimums(&mut self) {
        for (i, c) in self.constraints.iter().enumerate() {
            let counts = &self.counts[i];
            self.min[i] = if (counts.len() as i32) < c.min_domains {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            };
        }
    }

    /// Upstream's AddPod / RemovePod: `p` counted on `node` (by 1) or no longer (by -1), where
    /// the node counts for the constraint, as in `new`.
    pub fn update(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        let labels = node.labels();
        if p.namespace() != self.pod.namespace() || !has_all_keys(labels, &self.constraints) {
            return;
        }
        for (c, counts) in self.constraints.iter().zip(self.counts.iter_mut()) {
            let Some(v) = labels.get(&c.topology_key) else {
                continue;
            };
            if c.selector.matches_map(p.labels()) && c.includes(&self.pod, &self.required, node) {
                if let Some(n) = counts.get_mut(v) {
                    *n += by;
                }
            }
        }
        self.find_minimums();
    }

    pub fn filter(&self, node: &NodeInfo) -> Result<(), Reject> {
        let labels = node.labels();
        for (i, c) in self.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                return Err(Reject::unresolvable(MISSING_LABEL));
            };
            let here = self.counts[i].get(value).copied().unwrap_or(0);
            let skew = here + i64::from(self.self_match[i]) - self.min[i];
            if skew > i64::from(c.max_skew) {
                return Err(Reject::unschedulable(CONSTRAINTS_NOT_MATCH));
            }
        }
        Ok(())
    }
}

/// PreScore's counts over every node for the ScheduleAnyway constraints: matching Pods per
/// domain (hostname domains are counted on the node itself at Score). They do not depend on
/// which nodes are feasible, so a pass keeps them for the Pods of a template.
#[derive(Clone, Debug)]
pub struct DomainCounts {
    constraints: Vec<Constraint>,
    require_all: bool,
    counts: Topology,
    pod: Arc<PodInfo>,
    required: Required,
}

impl DomainCounts {
    /// None when the Pod has no ScheduleAnyway constraint.
    pub fn new(
        pod: &Arc<PodInfo>,
        all: &[Constraint],
        system_defaulted: bool,
        required: &Required,
        nodes: &[NodeInfo],
    ) -> Option<DomainCounts> {
        let constraints: Vec<Constraint> = all.iter().filter(|c| !c.hard).cloned().collect();
        if constraints.is_empty() {
            return None;
        }
        let mut d = DomainCounts {
            constraints,
            require_all: !system_defaulted,
            counts: Topology::default(),
            pod: pod.clone(),
            required: required.clone(),
        };
        if d.constraints.iter().any(|c| c.topology_key != HOSTNAME) {
            for node in nodes {
                for p in &node.pods {
                    d.update(p, node, 1);
                }
            }
        }
        Some(d)
    }

    /// `p` counted on `node` (by 1) or no longer (by -1).
    pub fn update(&mut self, p: &PodInfo, node: &NodeInfo, by: i64) {
        let labels = node.labels();
        if p.namespace() != self.pod.namespace()
            || (self.require_all && !has_all_keys(labels, &self.constraints))
        {
            return;
        }
        for c in &self.constraints {
            if c.topology_key == HOSTNAME || !c.selector.matches_map(p.labels()) {
                continue;
            }
            let Some(v) = labels.get(&c.topology_key) else {
                continue;
            };
            if c.includes(&self.pod, &self.required, node) {
                self.counts.add_raw(&c.topology_key, v, by);
            }
        }
    }
}

/// PreScore's state for the ScheduleAnyway constraints.
pub struct ScoreState {
    constraints: Vec<Constraint>,
    /// Nodes (by name) missing a topology key: they score 0.
    ignored: HashSet<String>,
    pairs: Topology,
    weights: Vec<f64>,
    namespace: String,
}

impl ScoreState {
    /// The domains of the feasible nodes, with their counts over every node from `counts`.
    pub fn new(counts: &DomainCounts, feasible: &[&NodeInfo]) -> ScoreState {
        let constraints = &counts.constraints;
        let mut ignored = HashSet::new();
        let mut pairs = Topology::default();
        let mut sizes = vec![0usize; constraints.len()];
        for node in feasible {
            let labels = node.labels();
            if counts.require_all && !has_all_keys(labels, constraints) {
                ignored.insert(node.name.clone());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.topology_key == HOSTNAME {
                    continue;
                }
                if let Some(v) = labels.get(&c.topology_key) {
                    if pairs.insert_zero(&c.topology_key, v) {
                        sizes[i] += 1;
                    }
                }
            }
        }
        for (i, c) in constraints.iter().enumerate() {
            if c.topology_key == HOSTNAME {
                sizes[i] = feasible.len() - ignored.len();
            }
        }
        for (key, values) in pairs.0.iter_mut() {
            for (value, n) in values.iter_mut() {
                *n = counts.counts.get(key, value);
            }
        }
        let weights = sizes.iter().map(|s| ((*s + 2) as f64).ln()).collect();
        ScoreState {
            constraints: constraints.clone(),
            ignored,
            pairs,
            weights,
            namespace: counts.pod.namespace().to_string(),
        }
    }

    /// Upstream's Score: matching Pods in the node's domains, weighted by how many domains
    /// there are; lower is better (normalize turns it round).
    pub fn score(&self, node: &NodeInfo) -> Option<i64> {
        if self.ignored.contains(&node.name) {
            return None;
        }
        let labels = node.labels();
        let mut score = 0.0;
        for (i, c) in self.constraints.iter().enumerate() {
            let Some(v) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == HOSTNAME {
                c.count(&self.namespace, node)
            } else {
                self.pairs.get(&c.topology_key, v)
            };
            score += count as f64 * self.weights[i] + f64::from(c.max_skew - 1);
        }
        Some(score.round() as i64)
    }

    /// Upstream's NormalizeScore: the least loaded node 100, ignored nodes 0.
    pub fn normalize(scores: &mut [Option<i64>]) -> Vec<i64> {
        let valid = scores.iter().flatten();
        let min = valid.clone().copied().min().unwrap_or(0);
        let max = valid.copied().max().unwrap_or(0);
        scores
            .iter()
            .map(|s| match s {
                None => 0,
                Some(_) if max == 0 => 100,
                Some(s) => 100 * (max + min - s) / max,
            })
            .collect()
    }
}
