//! What counts on each node during one scheduling pass: bound and assumed Pods, and the room
//! held for Pods nominated by a preemption until they bind; and the watches it is built from.

use crate::framework::Cluster;
use crate::kept::Kept;
use crate::node_info::{NodeInfo, PodInfo};
use crate::plugins::fit::Images;
use crate::preemption::priority;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use keelson_apimachinery::labels::LabelSelector;
use keelson_daemon::Objects;
use kube::ResourceExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The scheduler's watches.
pub(crate) struct Stores {
    pub pods: Objects<Pod>,
    pub nodes: Objects<Node>,
    pub claims: Objects<PersistentVolumeClaim>,
    pub volumes: Objects<PersistentVolume>,
    pub classes: Objects<StorageClass>,
    pub budgets: Objects<PodDisruptionBudget>,
    pub namespaces: Objects<Namespace>,
    pub services: Objects<Service>,
    pub replica_sets: Objects<ReplicaSet>,
    pub stateful_sets: Objects<StatefulSet>,
    /// None where the API server serves none (Keelson's own).
    pub controllers: Option<Objects<ReplicationController>>,
}

impl Stores {
    /// Waits for every first list.
    pub async fn synced(&self) {
        futures::join!(
            self.pods.synced(),
            self.nodes.synced(),
            self.claims.synced(),
            self.volumes.synced(),
            self.classes.synced(),
            self.budgets.synced(),
            self.namespaces.synced(),
            self.services.synced(),
            self.replica_sets.synced(),
            self.stateful_sets.synced(),
        );
        if let Some(rc) = &self.controllers {
            rc.synced().await;
        }
    }

    /// Namespaces' labels, Services' and controllers' selectors, as this pass sees them.
    pub fn cluster(&self, nodes: &[NodeInfo]) -> Cluster {
        let namespaces = self
            .namespaces
            .state()
            .iter()
            .map(|n| (n.name_any(), n.labels().clone()))
            .collect();
        let mut services: HashMap<String, Vec<_>> = HashMap::new();
        for s in self.services.state() {
            if let Some(sel) = s.spec.as_ref().and_then(|s| s.selector.clone()) {
                services
                    .entry(s.namespace().unwrap_or_default())
                    .or_default()
                    .push(sel);
            }
        }
        let mut controllers = HashMap::new();
        let mut add =
            |kind: &str, ns: Option<String>, name: String, sel: Option<serde_json::Value>| {
                if let Some(sel) = sel.and_then(|v| LabelSelector::from_json(&v).ok()) {
                    controllers.insert((kind.to_string(), ns.unwrap_or_default(), name), sel);
                }
            };
        for rs in self.replica_sets.state() {
            let sel = serde_json::to_value(&rs.spec.selector).ok();
            add("ReplicaSet", rs.namespace(), rs.name_any(), sel);
        }
        for ss in self.stateful_sets.state() {
            let sel = serde_json::to_value(&ss.spec.selector).ok();
            add("StatefulSet", ss.namespace(), ss.name_any(), sel);
        }
        for rc in self.controllers.iter().flat_map(|s| s.state()) {
            // A ReplicationController's selector is a plain map.
            let sel = rc
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .map(|m| serde_json::json!({ "matchLabels": m }));
            add("ReplicationController", rc.namespace(), rc.name_any(), sel);
        }
        Cluster {
            namespaces,
            services,
            controllers,
            images: Images::new(nodes),
        }
    }
}

/// Parsed Pods by uid and resourceVersion: a Pod's terms and quantities are parsed once, not
/// once per pass.
#[derive(Default)]
pub(crate) struct PodCache(Mutex<HashMap<String, (String, Arc<PodInfo>)>>);

impl PodCache {
    pub fn get(&self, pod: &Arc<Pod>) -> Arc<PodInfo> {
        let uid = pod.uid().unwrap_or_default();
        let rv = pod.resource_version().unwrap_or_default();
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, info)) = cache.get(&uid) {
            if *seen == rv {
                return info.clone();
            }
        }
        let info = Arc::new(PodInfo::new(pod.clone()));
        cache.insert(uid, (rv, info.clone()));
        info
    }

    /// Forgets Pods no longer in the store.
    pub fn retain(&self, uids: &std::collections::HashSet<String>) {
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|uid, _| uids.contains(uid));
    }
}

pub(crate) struct View {
    pub infos: Vec<NodeInfo>,
    pub index: HashMap<String, usize>,
    /// The plugins' states kept for the next Pod of a template, updated with every change.
    pub kept: Kept,
}

impl View {
    pub fn new(infos: Vec<NodeInfo>, index: HashMap<String, usize>) -> View {
        View {
            infos,
            index,
            kept: Kept::default(),
        }
    }

    pub fn place(&mut self, i: usize, pod: &Arc<PodInfo>) {
        self.infos[i].add(pod);
        self.kept.update(pod, &self.infos[i], 1);
    }

    pub fn unplace(&mut self, i: usize, pod: &Arc<PodInfo>) {
        if self.infos[i].remove(pod) {
            self.kept.update(pod, &self.infos[i], -1);
        }
    }
}

/// Pending Pods nominated to a node, as upstream's addNominatedPods: each holds its room
/// against Pods of lower or equal priority (so the room its victims freed is not taken by
/// them), but not against more important ones. The queue runs from the highest priority
/// down, so a nomination is held from the moment the queue reaches its priority.
pub(crate) struct Nominations {
    /// In queue order, with the node's index.
    pods: Vec<(Arc<PodInfo>, usize)>,
    held: usize,
}

impl Nominations {
    /// `queue` in queue order; `node` is the Pod's nominated node, if any.
    pub fn new(queue: &[Arc<PodInfo>], node: impl Fn(&Pod) -> Option<usize>) -> Nominations {
        let pods = queue
            .iter()
            .filter_map(|p| node(&p.pod).map(|i| (p.clone(), i)))
            .collect();
        Nominations { pods, held: 0 }
    }

    /// Before `pod` is tried: the room of every nominated Pod at least as important is held,
    /// and `pod`'s own nomination is given back to it (the caller places it again where it
    /// binds or preempts; otherwise its nomination is cleared, as upstream's).
    pub fn hold_for(&mut self, pod: &Arc<PodInfo>, view: &mut View) {
        let floor = priority(&pod.pod);
        while let Some((p, i)) = self.pods.get(self.held) {
            if priority(&p.pod) < floor {
                break;
            }
            view.place(*i, p);
            self.held += 1;
        }
        if let Some((p, i)) = self.pods[..self.held]
            .iter()
            .find(|(p, _)| Arc::ptr_eq(p, pod))
        {
            view.unplace(*i, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, priority: i32) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(Arc::new(
            serde_json::from_value(json!({
                "metadata": { "name": name },
                "spec": { "priority": priority, "containers": [{ "name": "c",
                    "resources": { "requests": { "cpu": "800m" } } }] },
            }))
            .unwrap(),
        )))
    }

    fn one_node() -> View {
        let node = serde_json::from_value(json!({ "metadata": { "name": "n" },
            "status": { "allocatable": { "cpu": "1" } } }))
        .unwrap();
        View::new(
            vec![NodeInfo::new(Arc::new(node))],
            HashMap::from([("n".to_string(), 0)]),
        )
    }

    #[test]
    fn a_nomination_holds_room_against_equal_and_lower_priority_only() {
        let (top, peer, nominee) = (pod("top", 2000), pod("peer", 1000), pod("nominee", 1000));
        // The queue's order: the peer of equal priority has waited longer than the nominee.
        let queue = [top.clone(), peer.clone(), nominee.clone()];
        let mut view = one_node();
        let mut n = Nominations::new(&queue, |p| {
            (p.metadata.name.as_deref() == Some("nominee")).then_some(0)
        });
        // A more important Pod does not see the hold.
        n.hold_for(&top, &mut view);
        assert_eq!(view.infos[0].pods.len(), 0);
        // One of equal priority finds the room taken, as upstream's nominated pods.
        n.hold_for(&peer, &mut view);
        assert_eq!(
            (view.infos[0].pods.len(), view.infos[0].requested.milli_cpu),
            (1, 800)
        );
        // The nominee itself tries with its hold given back.
        n.hold_for(&nominee, &mut view);
        assert_eq!(view.infos[0].pods.len(), 0);
    }
}
