//! What counts on each node during one scheduling pass: bound and assumed Pods, and the room
//! held for Pods nominated by a preemption until they bind.

use crate::node_info::NodeInfo;
use crate::preemption::priority;
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) struct View {
    pub infos: Vec<NodeInfo>,
    /// The Pods counted in `infos[i]` (preemption's candidates).
    pub on_node: Vec<Vec<Arc<Pod>>>,
    pub index: HashMap<String, usize>,
}

impl View {
    pub fn place(&mut self, i: usize, pod: &Arc<Pod>) {
        self.infos[i].add(pod);
        self.on_node[i].push(pod.clone());
    }

    pub fn unplace(&mut self, i: usize, pod: &Arc<Pod>) {
        if let Some(k) = self.on_node[i].iter().position(|p| Arc::ptr_eq(p, pod)) {
            self.on_node[i].swap_remove(k);
            self.infos[i].remove(pod);
        }
    }
}

/// Pending Pods nominated to a node, as upstream's addNominatedPods: each holds its room
/// against Pods of lower or equal priority (so the room its victims freed is not taken by
/// them), but not against more important ones. The queue runs from the highest priority
/// down, so a nomination is held from the moment the queue reaches its priority.
pub(crate) struct Nominations {
    /// In queue order, with the node's index.
    pods: Vec<(Arc<Pod>, usize)>,
    held: usize,
}

impl Nominations {
    /// `queue` in queue order; `node` is the Pod's nominated node, if any.
    pub fn new(queue: &[Arc<Pod>], node: impl Fn(&Pod) -> Option<usize>) -> Nominations {
        let pods = queue
            .iter()
            .filter_map(|p| node(p).map(|i| (p.clone(), i)))
            .collect();
        Nominations { pods, held: 0 }
    }

    /// Before `pod` is tried: the room of every nominated Pod at least as important is held,
    /// and `pod`'s own nomination is given back to it (the caller places it again where it
    /// binds or preempts; otherwise its nomination is cleared, as upstream's).
    pub fn hold_for(&mut self, pod: &Arc<Pod>, view: &mut View) {
        let floor = priority(pod);
        while let Some((p, i)) = self.pods.get(self.held) {
            if priority(p) < floor {
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

    fn pod(name: &str, priority: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": { "name": name },
                "spec": { "priority": priority, "containers": [{ "name": "c",
                    "resources": { "requests": { "cpu": "800m" } } }] },
            }))
            .unwrap(),
        )
    }

    fn one_node() -> View {
        let node = serde_json::from_value(json!({ "metadata": { "name": "n" },
            "status": { "allocatable": { "cpu": "1" } } }))
        .unwrap();
        View {
            infos: vec![NodeInfo::new(node)],
            on_node: vec![Vec::new()],
            index: HashMap::from([("n".to_string(), 0)]),
        }
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
        assert_eq!(view.infos[0].pods, 0);
        // One of equal priority finds the room taken, as upstream's nominated pods.
        n.hold_for(&peer, &mut view);
        assert_eq!((view.infos[0].pods, view.infos[0].requested.0), (1, 0.8));
        // The nominee itself tries with its hold given back.
        n.hold_for(&nominee, &mut view);
        assert_eq!((view.infos[0].pods, view.on_node[0].len()), (0, 0));
    }
}
