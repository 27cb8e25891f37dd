//! One scheduling cycle, as upstream's framework runs a profile: PreFilter (the Pod's state,
//! computed once), Filter over the nodes until enough fit, PreScore and Score per plugin,
//! NormalizeScore, the weighted sum, and the best node; or why no node fits.

use crate::config::Profile;
use crate::kept::Kept;
use crate::metrics::Timer;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{self, fit, interpod, node_affinity, spread, Plugin, Reject};
use crate::volumes::{self, PodVolumes};
use keelson_apimachinery::labels::{LabelSelector, Operator, Requirement};
use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a pass knows of the cluster beyond its nodes: namespaces' labels (namespaceSelector),
/// the selectors of Services and controllers (the default spreading constraints), images.
#[derive(Default)]
pub struct Cluster {
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Per namespace, the selectors of its Services.
    pub services: HashMap<String, Vec<BTreeMap<String, String>>>,
    /// (kind, namespace, name) of ReplicaSets, StatefulSets and ReplicationControllers.
    pub controllers: HashMap<(String, String, String), LabelSelector>,
    pub images: fit::Images,
}

impl Cluster {
    /// Upstream's DefaultSelector: the selectors of the Services that select the Pod, and of
    /// its controller (ReplicaSet, StatefulSet or ReplicationController), together.
    pub fn default_selector(&self, pod: &PodInfo) -> Option<LabelSelector> {
        let mut merged: BTreeMap<&str, &str> = BTreeMap::new();
        let labels = pod.labels();
        for sel in self.services.get(pod.namespace()).into_iter().flatten() {
            if !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                merged.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
        }
        let mut reqs: Vec<Requirement> = merged
            .into_iter()
            .filter_map(|(k, v)| Requirement::new(k, Operator::Equals, vec![v.into()]).ok())
            .collect();
        let mut owner = pod.pod.metadata.owner_references.iter().flatten();
        if let Some(o) = owner.find(|o| o.controller == Some(true)) {
            let key = (o.kind.clone(), pod.namespace().to_string(), o.name.clone());
            let known = matches!(
                (o.api_version.as_str(), o.kind.as_str()),
                ("apps/v1", "ReplicaSet" | "StatefulSet") | ("v1", "ReplicationController")
            );
            if let Some(sel) = self.controllers.get(&key).filter(|_| known) {
                reqs.extend(sel.requirements().iter().cloned());
            }
        }
        (!reqs.is_empty()).then(|| LabelSelector::from_requirements(reqs))
    }
}

/// Why no node fits a Pod: the filters' reasons counted over nodes, and the nodes where
/// evicting lower-priority Pods could make room (preemption's candidates).
#[derive(Debug)]
pub struct Unfit {
    pub nodes: usize,
    pub reasons: HashMap<Cow<'static, str>, usize>,
    pub could_help: Vec<usize>,
}

/// A Pod's cycle: its PreFilter state, against the nodes of one pass.
pub struct Cycle<'a> {
    pub pod: Arc<PodInfo>,
    pub profile: &'a Profile,
    vols: &'a PodVolumes,
    required: node_affinity::Required,
    constraints: Vec<spread::Constraint>,
    system_defaulted: bool,
    interpod: Option<Arc<interpod::FilterState>>,
    interpod_scores: OnceCell<Arc<interpod::ScoreState>>,
    spread: Option<Arc<spread::FilterState>>,
    spread_counts: OnceCell<Option<Arc<spread::DomainCounts>>>,
    node_affinity: Option<Arc<node_affinity::Memo>>,
    timer: Timer<'a>,
}

impl<'a> Cycle<'a> {
    /// The Pod's states are taken from `kept` where a Pod of its template left them, and kept
    /// there otherwise.
    pub fn new(
        pod: Arc<PodInfo>,
        profile: &'a Profile,
        cluster: &Cluster,
        nodes: &[NodeInfo],
        kept: &mut Kept,
        vols: &'a PodVolumes,
        timer: Timer<'a>,
    ) -> Cycle<'a> {
        let span = timer.extension("PreFilter");
        let required = node_affinity::Required::of(&pod.pod);
        let on =
            |p: Plugin| profile.filters.contains(&p) || profile.scores.iter().any(|s| s.0 == p);
        let (constraints, system_defaulted) = if on(Plugin::PodTopologySpread) {
            spread::constraints(
                &pod,
                &profile.spread_defaults,
                profile.spread_system,
                || cluster.default_selector(&pod),
            )
        } else {
            (Vec::new(), false)
        };
        let filtering = |p: Plugin| profile.filters.contains(&p);
        let states = kept.of(&profile.scheduler_name, &pod);
        let interpod = kept_or_made(
            &mut states.interpod,
            filtering(Plugin::InterPodAffinity),
            || {
                timer.plugin(Plugin::InterPodAffinity, "PreFilter", || {
                    interpod::FilterState::new(&pod, nodes, &cluster.namespaces)
                })
            },
        );
        let spread = kept_or_made(
            &mut states.spread,
            filtering(Plugin::PodTopologySpread),
            || {
                timer.plugin(Plugin::PodTopologySpread, "PreFilter", || {
                    spread::FilterState::new(&pod, &constraints, &required, nodes)
                })
            },
        );
        let node_affinity = kept_or_made(&mut states.node_affinity, !required.is_empty(), || {
            Some(node_affinity::Memo::new(nodes.len()))
        });
        // PreScore's states are made at the first Score (a Pod that fits one node or none
        // needs none), unless a Pod of the template left them.
        let interpod_scores = OnceCell::new();
        if let Some(s) = &states.interpod_scores {
            let _ = interpod_scores.set(s.clone());
        }
        let spread_counts = OnceCell::new();
        if let Some(s) = &states.spread_counts {
            let _ = spread_counts.set(Some(s.clone()));
        }
        drop(span);
        Cycle {
            pod,
            profile,
            vols,
            required,
            constraints,
            system_defaulted,
            interpod,
            interpod_scores,
            spread,
            spread_counts,
            node_affinity,
            timer,
        }
    }

    /// Every filter of the profile, in order, on node `i` of the nodes the cycle was made
    /// with; the first that fails says why.
    pub fn filter(&self, i: usize, node: &NodeInfo) -> Result<(), Reject> {
        let (interpod, spread) = (self.interpod.as_deref(), self.spread.as_deref());
        self.filter_with(node, Some(i), interpod, spread)
    }

    /// `filter` with the inter-pod and spreading counts of a preemption dry run.
    pub fn filter_with(
        &self,
        node: &NodeInfo,
        index: Option<usize>,
        interpod: Option<&interpod::FilterState>,
        spread: Option<&spread::FilterState>,
    ) -> Result<(), Reject> {
        let pod = &self.pod;
        for &p in &self.profile.filters {
            let run = || match p {
                Plugin::NodeUnschedulable => plugins::node_unschedulable(pod, node),
                Plugin::NodeName => plugins::node_name(pod, node),
                Plugin::TaintToleration => plugins::taints(pod, node),
                Plugin::NodeAffinity => {
                    let fits = match (index, self.node_affinity.as_deref()) {
                        (Some(i), Some(memo)) => memo.matches(&self.required, i, node),
                        _ => self.required.matches(node),
                    };
                    match fits {
                        true => Ok(()),
                        false => Err(Reject::unresolvable(node_affinity::NOT_MATCH)),
                    }
                }
                Plugin::NodePorts => plugins::ports(pod, node),
                Plugin::NodeResourcesFit => fit::filter(pod, node),
                Plugin::VolumeBinding if self.vols.is_empty() => Ok(()),
                Plugin::VolumeBinding => match volumes::unfit(self.vols, &node.node) {
                    Some(why) => Err(Reject::unresolvable(why)),
                    None => Ok(()),
                },
                Plugin::PodTopologySpread => spread.map_or(Ok(()), |s| s.filter(node)),
                Plugin::InterPodAffinity => interpod.map_or(Ok(()), |s| s.filter(node)),
                _ => Ok(()),
            };
            self.timer.plugin(p, "Filter", run)?;
        }
        Ok(())
    }

    /// Leaves the PreScore states this cycle made in `kept`, for the next Pod of its template.
    pub fn keep(self, kept: &mut Kept) {
        let states = kept.of(&self.profile.scheduler_name, &self.pod);
        if let Some(s) = self.interpod_scores.into_inner() {
            states.interpod_scores.get_or_insert(s);
        }
        if let Some(Some(s)) = self.spread_counts.into_inner() {
            states.spread_counts.get_or_insert(s);
        }
    }

    /// Spreading's ScheduleAnyway counts over every node, made at the first Score.
    fn spread_counts(&self, nodes: &[NodeInfo]) -> Option<&spread::DomainCounts> {
        let made = self.spread_counts.get_or_init(|| {
            let (pod, constraints) = (&self.pod, &self.constraints);
            spread::DomainCounts::new(
                pod,
                constraints,
                self.system_defaulted,
                &self.required,
                nodes,
            )
            .map(Arc::new)
        });
        made.as_deref()
    }

    /// Whether the Pod fits `trial` (node `original` with `removed` Pods taken off), the
    /// inter-pod and spreading counts updated as upstream's RemovePod does.
    pub fn fits_without(&self, original: &NodeInfo, trial: &NodeInfo) -> bool {
        let removed = original
            .pods
            .iter()
            .filter(|p| !trial.pods.iter().any(|q| Arc::ptr_eq(p, q)));
        let mut interpod = self.interpod.as_deref().cloned();
        let mut spread = self.spread.as_deref().cloned();
        for p in removed {
            if let Some(s) = interpod.as_mut() {
                s.update(p, original, -1);
            }
            if let Some(s) = spread.as_mut() {
                s.update(p, original, -1);
            }
        }
        self.filter_with(trial, None, interpod.as_ref(), spread.as_ref())
            .is_ok()
    }

    /// Scores the feasible nodes: each plugin's normalized score times its weight, summed.
    pub fn score(&self, cluster: &Cluster, nodes: &[NodeInfo], feasible: &[usize]) -> Vec<i64> {
        let _t = self.timer.extension("Score");
        let infos: Vec<&NodeInfo> = feasible.iter().map(|&i| &nodes[i]).collect();
        let mut totals = vec![0i64; infos.len()];
        let pod = &self.pod;
        for &(p, weight) in &self.profile.scores {
            let scores = self.timer.plugin(p, "Score", || match p {
                Plugin::TaintToleration => {
                    let mut s: Vec<i64> = infos
                        .iter()
                        .map(|n| plugins::intolerable_preferences(pod, n))
                        .collect();
                    plugins::default_normalize(&mut s, true);
                    s
                }
                Plugin::NodeAffinity => {
                    let terms = node_affinity::preferred(&pod.pod);
                    let mut s: Vec<i64> = infos
                        .iter()
                        .map(|n| node_affinity::score(&terms, n))
                        .collect();
                    plugins::default_normalize(&mut s, false);
                    s
                }
                Plugin::NodeResourcesFit => infos
                    .iter()
                    .map(|n| fit::score(&self.profile.fit, pod, n))
                    .collect(),
                Plugin::NodeResourcesBalancedAllocation => infos
                    .iter()
                    .map(|n| fit::balanced(pod, n).unwrap_or(0))
                    .collect(),
                Plugin::ImageLocality => {
                    let images = cluster.images.of(pod);
                    infos.iter().map(|n| images.score(n)).collect()
                }
                Plugin::InterPodAffinity => {
                    let st = self.interpod_scores.get_or_init(|| {
                        let hard = self.profile.hard_pod_affinity_weight;
                        Arc::new(interpod::ScoreState::new(
                            pod,
                            nodes,
                            &cluster.namespaces,
                            hard,
                        ))
                    });
                    if st.is_empty() {
                        vec![0; infos.len()]
                    } else {
                        let mut s: Vec<i64> = infos.iter().map(|n| st.score(n)).collect();
                        interpod::ScoreState::normalize(&mut s);
                        s
                    }
                }
                Plugin::PodTopologySpread => match self.spread_counts(nodes) {
                    None => vec![0; infos.len()],
                    Some(counts) => {
                        let st = spread::ScoreState::new(counts, &infos);
                        let mut s: Vec<Option<i64>> = infos.iter().map(|n| st.score(n)).collect();
                        spread::ScoreState::normalize(&mut s)
                    }
                },
                _ => vec![0; infos.len()],
            });
            for (t, s) in totals.iter_mut().zip(scores) {
                *t += weight * s;
            }
        }
        totals
    }
}

/// The state kept in `slot` for the Pod's template; else, when the plugin is `on`, `make`'s,
/// kept there for the next Pod of the template.
fn kept_or_made<T>(
    slot: &mut Option<Arc<T>>,
    on: bool,
    make: impl FnOnce() -> Option<T>,
) -> Option<Arc<T>> {
    if slot.is_none() && on {
        *slot = make().map(Arc::new);
    }
    slot.clone()
}

/// How many fitting nodes to find before the search stops, as upstream's numFeasibleNodesToFind:
/// every node below 100; else `percentage` of them (0: adaptive, 50% less one point per 125
/// nodes, never under 5%), never under 100 nodes.
pub fn feasible_nodes_to_find(all: usize, percentage: u32) -> usize {
    const MIN_NODES: usize = 100;
    const MIN_PERCENT: usize = 5;
    if all < MIN_NODES || percentage >= 100 {
        return all;
    }
    let percent = match percentage {
        0 => 50usize.saturating_sub(all / 125).max(MIN_PERCENT),
        p => p as usize,
    };
    (all * percent / 100).max(MIN_NODES)
}

/// Filter from node `start` on, wrapping around, until enough nodes fit, then score them and
/// take the best (the first of equals). Also returns how many nodes were looked at, so that
/// the next Pod starts after them (upstream's nextStartNodeIndex) and every node gets its
/// turn. When none fits, every node was looked at and the message counts them all.
pub fn schedule_one(
    cycle: &Cycle,
    cluster: &Cluster,
    nodes: &[NodeInfo],
    start: usize,
) -> (Result<usize, Unfit>, usize) {
    let want = feasible_nodes_to_find(nodes.len(), cycle.profile.percentage_of_nodes_to_score);
    let mut reasons: HashMap<Cow<'static, str>, usize> = HashMap::new();
    let mut could_help = Vec::new();
    let mut feasible = Vec::new();
    let mut looked = 0;
    {
        let _t = cycle.timer.extension("Filter");
        for k in 0..nodes.len() {
            if feasible.len() >= want {
                break;
            }
            let i = (start + k) % nodes.len();
            looked += 1;
            match cycle.filter(i, &nodes[i]) {
                Ok(()) => feasible.push(i),
                Err(reject) => {
                    if reject.resolvable {
                        could_help.push(i);
                    }
                    for r in reject.reasons {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
            }
        }
    }
    let picked = match feasible.len() {
        0 => Err(Unfit {
            nodes: nodes.len(),
            reasons,
            could_help,
        }),
        1 => Ok(feasible[0]),
        _ => {
            let totals = cycle.score(cluster, nodes, &feasible);
            let mut best = 0;
            for (k, t) in totals.iter().enumerate() {
                if *t > totals[best] {
                    best = k;
                }
            }
            Ok(feasible[best])
        }
    };
    (picked, looked)
}

impl Unfit {
    /// Upstream's FitError text when preemption found no victims on any node (or was not
    /// tried): what preemption made of each node follows the filters' reasons. The doubled
    /// final period is upstream's too.
    pub fn message(&self) -> String {
        if self.nodes == 0 {
            return "no nodes available to schedule pods".into();
        }
        let nodes = self.nodes;
        let mut preemption: HashMap<Cow<'static, str>, usize> = HashMap::new();
        let helpable = self.could_help.len();
        if helpable > 0 {
            preemption.insert(
                "No preemption victims found for incoming pod".into(),
                helpable,
            );
        }
        if nodes > helpable {
            preemption.insert(
                "Preemption is not helpful for scheduling".into(),
                nodes - helpable,
            );
        }
        self.message_with(&format!(
            "0/{nodes} nodes are available: {}.",
            histogram(&preemption)
        ))
    }

    /// The FitError text with preemption's verdict: why the Pod may not preempt, or empty
    /// once it nominated a node (upstream then adds nothing).
    pub fn message_with(&self, preemption: &str) -> String {
        let filters = format!(
            "0/{} nodes are available: {}.",
            self.nodes,
            histogram(&self.reasons)
        );
        if preemption.is_empty() {
            filters
        } else {
            format!("{filters} preemption: {preemption}.")
        }
    }
}

/// "COUNT REASON" entries sorted as strings, as upstream sorts them.
fn histogram(reasons: &HashMap<Cow<'static, str>, usize>) -> String {
    let mut lines: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    lines.sort();
    lines.join(", ")
}
