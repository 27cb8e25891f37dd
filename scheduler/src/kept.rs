//! The PreFilter and PreScore states a pass keeps between cycles. Pods of one template (a
//! Deployment's replicas) have the same states, so the first Pod's are kept and every
//! placement updates them as upstream's AddPod and RemovePod do, instead of each cycle counting
//! every Pod of the cluster again (at 5,000 nodes that count was most of an affinity cycle).

use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::{interpod, node_affinity, spread, FastMap};
use std::sync::Arc;

/// One template's states under one profile; None until a cycle computed one.
#[derive(Default)]
pub struct States {
    pub interpod: Option<Arc<interpod::FilterState>>,
    pub interpod_scores: Option<Arc<interpod::ScoreState>>,
    pub spread: Option<Arc<spread::FilterState>>,
    pub spread_counts: Option<Arc<spread::DomainCounts>>,
    /// Not updated by placements: it reads only the nodes.
    pub node_affinity: Option<Arc<node_affinity::Memo>>,
}

/// States by profile, then by `PodInfo::template()`.
#[derive(Default)]
pub struct Kept(FastMap<String, FastMap<String, States>>);

impl Kept {
    /// Templates kept at most: every placement updates each of them.
    const MAX: usize = 64;

    /// The states of `pod`'s template under `profile` (kept from an earlier cycle, or empty).
    pub fn of(&mut self, profile: &str, pod: &PodInfo) -> &mut States {
        if !self.0.contains_key(profile) {
            self.0.insert(profile.to_string(), FastMap::default());
        }
        let templates = self.0.get_mut(profile).expect("inserted above");
        let template = pod.template();
        if !templates.contains_key(template) {
            if templates.len() >= Self::MAX {
                templates.clear();
            }
            templates.insert(template.to_string(), States::default());
        }
        templates.get_mut(template).expect("inserted above")
    }

    /// `pod` counted on `node` (by 1), or no longer (by -1).
    pub fn update(&mut self, pod: &PodInfo, node: &NodeInfo, by: i64) {
        for states in self.0.values_mut().flat_map(|t| t.values_mut()) {
            if let Some(s) = states.interpod.as_mut() {
                Arc::make_mut(s).update(pod, node, by);
            }
            if let Some(s) = states.interpod_scores.as_mut() {
                Arc::make_mut(s).update(pod, node, by);
            }
            if let Some(s) = states.spread.as_mut() {
                Arc::make_mut(s).update(pod, node, by);
            }
            if let Some(s) = states.spread_counts.as_mut() {
                Arc::make_mut(s).update(pod, node, by);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use crate::framework::{schedule_one, Cluster, Cycle};
    use crate::metrics::Timer;
    use crate::volumes::PodVolumes;
    use serde_json::json;

    fn node(i: usize) -> NodeInfo {
        let name = format!("n{i}");
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({
                "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": format!("z{}", i % 3) } },
                "status": { "allocatable": { "cpu": "4", "memory": "8Gi", "pods": "110" },
                    "conditions": [{ "type": "Ready", "status": "True" }] },
            }))
            .unwrap(),
        ))
    }

    /// A replica of a template with every kept state: required node affinity (not n6), required
    /// anti-affinity on hostname,
    /// preferred affinity to its zone, and a hard and a soft spreading constraint over zones.
    fn replica(i: usize) -> Arc<PodInfo> {
        let sel = json!({ "matchLabels": { "app": "web" } });
        Arc::new(PodInfo::new(Arc::new(
            serde_json::from_value(json!({
                "metadata": { "name": format!("web-{i}"), "namespace": "default",
                    "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "c", "image": "i" }],
                    "affinity": {
                        "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "kubernetes.io/hostname",
                                "operator": "NotIn", "values": ["n6"] }] }] } },
                        "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
                            { "labelSelector": sel, "topologyKey": "kubernetes.io/hostname" }] },
                        "podAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [
                            { "weight": 10, "podAffinityTerm":
                                { "labelSelector": sel, "topologyKey": "topology.kubernetes.io/zone" } }] } },
                    "topologySpreadConstraints": [{ "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel },
                        { "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": sel }] },
            }))
            .unwrap(),
        )))
    }

    /// Where each of `n` replicas goes, placing each before the next, with states kept across
    /// the cycles or computed afresh for each.
    fn placements(n: usize, keep: bool) -> Vec<Result<usize, String>> {
        let (profile, cluster, vols) = (
            Profile::default(),
            Cluster::default(),
            PodVolumes::default(),
        );
        let mut nodes: Vec<NodeInfo> = (0..7).map(node).collect();
        let mut kept = Kept::default();
        let mut start = 0;
        (0..n)
            .map(|i| {
                let pod = replica(i);
                if !keep {
                    kept = Kept::default();
                }
                let cycle = Cycle::new(
                    pod.clone(),
                    &profile,
                    &cluster,
                    &nodes,
                    &mut kept,
                    &vols,
                    Timer::none(),
                );
                let (picked, looked) = schedule_one(&cycle, &cluster, &nodes, start);
                cycle.keep(&mut kept);
                start = (start + looked) % nodes.len();
                let picked = picked.map_err(|u| u.message())?;
                nodes[picked].add(&pod);
                kept.update(&pod, &nodes[picked], 1);
                Ok(picked)
            })
            .collect()
    }

    #[test]
    fn kept_states_place_a_template_as_fresh_ones_do() {
        let kept = placements(8, true);
        assert_eq!(kept, placements(8, false));
        let placed: Vec<usize> = kept.iter().flatten().copied().collect();
        // Six nodes allowed (n6 is not): six replicas apart (anti-affinity), two per zone.
        assert_eq!(placed.len(), 6, "{kept:?}");
        let mut distinct = placed.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 6);
        assert!(!placed.contains(&6));
        let message = kept[6].as_ref().unwrap_err();
        assert!(
            message.contains("6 node(s) didn't match pod anti-affinity rules"),
            "{message}"
        );
        assert!(
            message.contains("1 node(s) didn't match Pod's node affinity"),
            "{message}"
        );
    }
}
