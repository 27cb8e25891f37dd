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
    /// and `pod`'s own nomination is given back to it.
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
