//! The plugins of upstream's default profile, by the names a KubeSchedulerConfiguration uses.
//! Each filter says why a node does not fit in upstream's words, and whether evicting Pods
//! could change that (preemption's Unschedulable, as opposed to UnschedulableAndUnresolvable).

pub mod fit;
pub mod interpod;
pub mod node_affinity;
pub mod spread;

use crate::node_info::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::{Taint, Toleration};
use keelson_apimachinery::taints::tolerates;
use std::borrow::Cow;
use std::collections::BTreeMap;

pub use crate::{FastMap, FastSet};

/// A plugin of upstream's in-tree registry that Keelson runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plugin {
    SchedulingGates,
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeRestrictions,
    NodeVolumeLimits,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
    DefaultPreemption,
    NodeResourcesBalancedAllocation,
    ImageLocality,
    DefaultBinder,
}

impl Plugin {
    /// Upstream's default profile, in its order, with the default score weights.
    pub const DEFAULTS: [(Plugin, i64); 18] = [
        (Plugin::SchedulingGates, 0),
        (Plugin::PrioritySort, 0),
        (Plugin::NodeUnschedulable, 0),
        (Plugin::NodeName, 0),
        (Plugin::TaintToleration, 3),
        (Plugin::NodeAffinity, 2),
        (Plugin::NodePorts, 0),
        (Plugin::NodeResourcesFit, 1),
        (Plugin::VolumeRestrictions, 0),
        (Plugin::NodeVolumeLimits, 0),
        (Plugin::VolumeBinding, 0),
        (Plugin::VolumeZone, 0),
        (Plugin::PodTopologySpread, 2),
        (Plugin::InterPodAffinity, 2),
        (Plugin::DefaultPreemption, 0),
        (Plugin::NodeResourcesBalancedAllocation, 1),
        (Plugin::ImageLocality, 1),
        (Plugin::DefaultBinder, 0),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Plugin::SchedulingGates => "SchedulingGates",
            Plugin::PrioritySort => "PrioritySort",
            Plugin::NodeUnschedulable => "NodeUnschedulable",
            Plugin::NodeName => "NodeName",
            Plugin::TaintToleration => "TaintToleration",
            Plugin::NodeAffinity => "NodeAffinity",
            Plugin::NodePorts => "NodePorts",
            Plugin::NodeResourcesFit => "NodeResourcesFit",
            Plugin::VolumeRestrictions => "VolumeRestrictions",
            Plugin::NodeVolumeLimits => "NodeVolumeLimits",
            Plugin::VolumeBinding => "VolumeBinding",
            Plugin::VolumeZone => "VolumeZone",
            Plugin::PodTopologySpread => "PodTopologySpread",
            Plugin::InterPodAffinity => "InterPodAffinity",
            Plugin::DefaultPreemption => "DefaultPreemption",
            Plugin::NodeResourcesBalancedAllocation => "NodeResourcesBalancedAllocation",
            Plugin::ImageLocality => "ImageLocality",
            Plugin::DefaultBinder => "DefaultBinder",
        }
    }

    pub fn from_name(name: &str) -> Option<Plugin> {
        Plugin::DEFAULTS
            .iter()
            .map(|(p, _)| *p)
            .find(|p| p.name() == name)
    }

    /// Whether the plugin filters nodes.
    pub fn filters(self) -> bool {
        matches!(
            self,
            Plugin::NodeUnschedulable
                | Plugin::NodeName
                | Plugin::TaintToleration
                | Plugin::NodeAffinity
                | Plugin::NodePorts
                | Plugin::NodeResourcesFit
                | Plugin::VolumeBinding
                | Plugin::PodTopologySpread
                | Plugin::InterPodAffinity
        )
    }

    /// Whether the plugin scores nodes.
    pub fn scores(self) -> bool {
        matches!(
            self,
            Plugin::TaintToleration
                | Plugin::NodeAffinity
                | Plugin::NodeResourcesFit
                | Plugin::PodTopologySpread
                | Plugin::InterPodAffinity
                | Plugin::NodeResourcesBalancedAllocation
                | Plugin::ImageLocality
        )
    }
}

/// Why a node does not fit: upstream's reasons, and whether preemption could help.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    pub reasons: Vec<Cow<'static, str>>,
    /// Unschedulable (evicting Pods could make room) rather than UnschedulableAndUnresolvable.
    pub resolvable: bool,
}

impl Reject {
    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Reject {
        Reject {
            reasons: vec![reason.into()],
            resolvable: true,
        }
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Reject {
        Reject {
            reasons: vec![reason.into()],
            resolvable: false,
        }
    }
}

/// Counts or scores per topology domain (key, then value), as upstream's topologyToMatchedTermCount
/// and scoreMap; entries back at zero are dropped.
#[derive(Debug, Clone, Default)]
pub struct Topology(FastMap<String, FastMap<String, i64>>);

impl Topology {
    /// Adds `by` to the node's domain of `key`, if the node has that label.
    pub fn add(&mut self, node: &NodeInfo, key: &str, by: i64) {
        if let Some(v) = node.labels().get(key) {
            self.add_raw(key, v, by);
        }
    }

    pub fn add_raw(&mut self, key: &str, value: &str, by: i64) {
        // Looked up before inserting: most updates hit a domain already counted.
        if !self.0.contains_key(key) {
            self.0.insert(key.to_string(), FastMap::default());
        }
        let values = self.0.get_mut(key).expect("inserted above");
        let n = match values.get_mut(value) {
            Some(n) => n,
            None => values.entry(value.to_string()).or_default(),
        };
        *n += by;
        if *n == 0 {
            values.remove(value);
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    /// Records the domain with a zero count (kept); true when it was new.
    pub fn insert_zero(&mut self, key: &str, value: &str) -> bool {
        let values = self.0.entry(key.to_string()).or_default();
        if values.contains_key(value) {
            return false;
        }
        values.insert(value.to_string(), 0);
        true
    }

    pub fn contains(&self, key: &str, value: &str) -> bool {
        self.0.get(key).is_some_and(|v| v.contains_key(value))
    }

    pub fn get(&self, key: &str, value: &str) -> i64 {
        self.0
            .get(key)
            .and_then(|v| v.get(value))
            .copied()
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any domain `labels` belongs to has a count.
    pub fn any_for(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().any(|(k, values)| {
            labels
                .get(k)
                .is_some_and(|v| values.get(v).is_some_and(|n| *n > 0))
        })
    }

    /// The sum over the domains `labels` belongs to.
    pub fn sum_for(&self, labels: &BTreeMap<String, String>) -> i64 {
        self.0
            .iter()
            .filter_map(|(k, values)| values.get(labels.get(k)?))
            .sum()
    }
}

fn tolerations(pod: &PodInfo) -> &[Toleration] {
    let spec = pod.pod.spec.as_ref();
    spec.and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// NodeUnschedulable: a cordoned node takes only Pods that tolerate its taint
/// `node.kubernetes.io/unschedulable:NoSchedule`. Keelson also keeps Pods off nodes that are
/// not Ready (upstream leaves that to the not-ready taint the node controller adds).
pub fn node_unschedulable(pod: &PodInfo, node: &NodeInfo) -> Result<(), Reject> {
    static TAINT: std::sync::LazyLock<Taint> = std::sync::LazyLock::new(|| Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    });
    if !node.ready {
        return Err(Reject::unresolvable("node(s) were not ready"));
    }
    if node.cordoned && !tolerations(pod).iter().any(|t| tolerates(t, &TAINT)) {
        return Err(Reject::unresolvable("node(s) were unschedulable"));
    }
    Ok(())
}

/// NodeName: a Pod that names its node fits only there.
pub fn node_name(pod: &PodInfo, node: &NodeInfo) -> Result<(), Reject> {
    let wanted = pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    match wanted {
        Some(n) if !n.is_empty() && n != node.name => Err(Reject::unresolvable(
            "node(s) didn't match the requested node name",
        )),
        _ => Ok(()),
    }
}

/// TaintToleration's filter: the first NoSchedule or NoExecute taint the Pod does not tolerate.
pub fn taints(pod: &PodInfo, node: &NodeInfo) -> Result<(), Reject> {
    if !node.hard_taints {
        return Ok(());
    }
    let tolerations = tolerations(pod);
    let taints = node.node.spec.as_ref().and_then(|s| s.taints.as_deref());
    let untolerated = taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)));
    match untolerated {
        Some(taint) => Err(Reject::unresolvable(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or_default()
        ))),
        None => Ok(()),
    }
}

/// TaintToleration's score (before normalizing, which turns it round): the PreferNoSchedule
/// taints the Pod's tolerations of that effect (or of any effect) do not tolerate.
pub fn intolerable_preferences(pod: &PodInfo, node: &NodeInfo) -> i64 {
    if !node.soft_taints {
        return 0;
    }
    let tolerations: Vec<&Toleration> = tolerations(pod)
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .collect();
    let taints = node.node.spec.as_ref().and_then(|s| s.taints.as_deref());
    taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .count() as i64
}

/// NodePorts: a host port (and protocol) another Pod on the node already uses.
pub fn ports(pod: &PodInfo, node: &NodeInfo) -> Result<(), Reject> {
    if pod
        .host_ports
        .iter()
        .any(|p| node.host_ports.contains_key(p))
    {
        return Err(Reject::unschedulable(
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    Ok(())
}

/// Upstream's DefaultNormalizeScore: the highest score becomes 100 (or, reversed, 0).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for s in scores.iter_mut() {
        let v = if max == 0 { 0 } else { 100 * *s / max };
        *s = if reverse { 100 - v } else { v };
    }
}

#[cfg(test)]
mod tests;
