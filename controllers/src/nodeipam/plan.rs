//! The pod CIDR allocator's decisions, pure: from every Node (and the CIDRs handed out but not yet
//! seen in a Node), which Nodes get which block, and which get a warning Event. The set of used
//! blocks is rebuilt from the Nodes on every plan, so a restart or a deleted Node needs no
//! bookkeeping: what no Node holds is free.

use super::cidrset::CidrSet;
use ipnetwork::IpNetwork;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use std::collections::{BTreeMap, HashSet};

/// Event reasons. CIDRNotAvailable is upstream's; the other two name what the controller found.
pub const CIDR_NOT_AVAILABLE: &str = "CIDRNotAvailable";
pub const POD_CIDR_OUT_OF_RANGE: &str = "PodCIDROutOfRange";
pub const POD_CIDR_COLLISION: &str = "PodCIDRCollision";

/// What the allocator reads of a Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub created: Option<Timestamp>,
    /// spec.podCIDRs, or spec.podCIDR when the list is empty.
    pub pod_cidrs: Vec<String>,
    pub deleting: bool,
}

impl NodeView {
    pub fn from_node(node: &Node) -> NodeView {
        let spec = node.spec.as_ref();
        let mut pod_cidrs = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
        if pod_cidrs.is_empty() {
            pod_cidrs.extend(spec.and_then(|s| s.pod_cidr.clone()));
        }
        pod_cidrs.retain(|c| !c.is_empty());
        NodeView {
            name: node.name_any(),
            uid: node.uid().unwrap_or_default(),
            resource_version: node.resource_version().unwrap_or_default(),
            created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
            pod_cidrs,
            deleting: node.metadata.deletion_timestamp.is_some(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Set spec.podCIDR and spec.podCIDRs of the Node (at the resourceVersion seen).
    Assign {
        node: String,
        uid: String,
        resource_version: String,
        cidr: IpNetwork,
    },
    /// A warning Event on the Node.
    Warn {
        node: String,
        uid: String,
        reason: &'static str,
        message: String,
    },
}

/// The allocator's memory between plans: the round-robin cursor (as upstream's nextCandidate, so a
/// freed block is not handed out again at once), the CIDRs written but not yet seen in the
/// Nodes, and the warnings already given.
pub struct Allocator {
    set: CidrSet,
    next: u32,
    /// Node name -> (uid, CIDR) written to it, until the Node shows it (or is gone).
    pending: BTreeMap<String, (String, IpNetwork)>,
    reported: HashSet<(String, &'static str, String)>,
    in_use: usize,
}

/// Which node holds each used block, during one plan.
type Used = BTreeMap<u32, String>;

impl Allocator {
    pub fn new(set: CidrSet) -> Allocator {
        Allocator {
            set,
            next: 0,
            pending: BTreeMap::new(),
            reported: HashSet::new(),
            in_use: 0,
        }
    }

    pub fn set(&self) -> &CidrSet {
        &self.set
    }

    /// Records that `cidr` was written to the Node, so later plans treat it as used even
    /// before the watch shows it.
    pub fn assigned(&mut self, node: &str, uid: &str, cidr: IpNetwork) {
        self.pending
            .insert(node.to_string(), (uid.to_string(), cidr));
    }

    /// Blocks in use as of the last plan, and blocks in the cluster CIDR.
    pub fn usage(&self) -> (usize, u32) {
        (self.in_use, self.set.len())
    }

    pub fn plan(&mut self, nodes: &[NodeView]) -> Vec<Action> {
        self.forget(nodes);
        let mut used = Used::new();
        for (name, (_, cidr)) in &self.pending {
            for i in self.set.covered(*cidr).into_iter().flatten() {
                used.insert(i, name.clone());
            }
        }
        let mut sorted: Vec<&NodeView> = nodes.iter().collect();
        sorted.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        let mut actions = Vec::new();
        let mut wanting = Vec::new();
        for n in sorted {
            if n.pod_cidrs.is_empty() {
                if !n.deleting && !self.pending.contains_key(&n.name) {
                    wanting.push(n);
                }
                continue;
            }
            for c in &n.pod_cidrs {
                self.occupy(n, c, &mut used, &mut actions);
            }
        }
        for n in wanting {
            self.allocate(n, &mut used, &mut actions);
        }
        self.in_use = used.len();
        actions
    }

    /// Drops pending CIDRs the Nodes now show (or whose Node is gone), and warnings about
    /// Nodes that are gone.
    fn forget(&mut self, nodes: &[NodeView]) {
        let live: BTreeMap<&str, &NodeView> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        self.pending.retain(|name, (uid, _)| {
            live.get(name.as_str())
                .is_some_and(|n| &n.uid == uid && n.pod_cidrs.is_empty())
        });
        let uids: HashSet<&str> = nodes.iter().map(|n| n.uid.as_str()).collect();
        self.reported
            .retain(|(uid, _, _)| uids.contains(uid.as_str()));
    }

    /// Marks a Node's existing CIDR as used; one outside the range or over another Node's is
    /// left as it is, with a warning.
    fn occupy(&mut self, n: &NodeView, cidr: &str, used: &mut Used, out: &mut Vec<Action>) {
        let cluster = self.set.cluster();
        let parsed: Option<IpNetwork> = cidr.parse().ok();
        if parsed.is_some_and(|c| c.is_ipv6() != cluster.is_ipv6()) {
            // Dual-stack: the other family's CIDR is not this allocator's.
            return;
        }
        let Some(blocks) = parsed.and_then(|c| self.set.covered(c)) else {
            let message = format!("spec.podCIDRs {cidr} of Node {} is outside --cluster-cidr {cluster}; left as it is, pods on it get addresses that are not routed in the cluster", n.name);
            self.warn(n, POD_CIDR_OUT_OF_RANGE, message, out);
            return;
        };
        let mut collided = None;
        for i in blocks {
            match used.get(&i) {
                Some(other) if *other != n.name => collided = Some(other.clone()),
                _ => {
                    used.insert(i, n.name.clone());
                }
            }
        }
        if let Some(other) = collided {
            let message = format!("spec.podCIDRs {cidr} of Node {} overlaps the pod CIDR of Node {other}; left as it is, pods on the two nodes may get the same addresses", n.name);
            self.warn(n, POD_CIDR_COLLISION, message, out);
        }
    }

    /// The next free block from the cursor (wrapping), or a CIDRNotAvailable warning.
    fn allocate(&mut self, n: &NodeView, used: &mut Used, out: &mut Vec<Action>) {
        let len = self.set.len();
        let free = (0..len)
            .map(|k| self.next.wrapping_add(k) % len)
            .find(|i| !used.contains_key(i));
        let Some(i) = free else {
            let cluster = self.set.cluster();
            let message = format!("no pod CIDR left for Node {}: all {len} blocks of --cluster-cidr {cluster} are in use", n.name);
            self.warn(n, CIDR_NOT_AVAILABLE, message, out);
            return;
        };
        used.insert(i, n.name.clone());
        self.next = (i + 1) % len;
        out.push(Action::Assign {
            node: n.name.clone(),
            uid: n.uid.clone(),
            resource_version: n.resource_version.clone(),
            cidr: self.set.block(i),
        });
    }

    /// A warning, once per Node and message.
    fn warn(&mut self, n: &NodeView, reason: &'static str, message: String, out: &mut Vec<Action>) {
        if self
            .reported
            .insert((n.uid.clone(), reason, message.clone()))
        {
            out.push(Action::Warn {
                node: n.name.clone(),
                uid: n.uid.clone(),
                reason,
                message,
            });
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
