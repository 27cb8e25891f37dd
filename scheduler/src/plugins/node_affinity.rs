//! NodeAffinity, as upstream's plugin: nodeSelector and the required node affinity terms
//! filter (terms ORed, expressions ANDed; matchFields on metadata.name), the preferred terms'
//! weights score.

use crate::node_info::NodeInfo;
use k8s_openapi::api::core::v1::{NodeSelector, Pod, PreferredSchedulingTerm};
use keelson_apimachinery::node_affinity::{selects, term_selects};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};

pub const NOT_MATCH: &str = "node(s) didn't match Pod's node affinity/selector";

/// Upstream's RequiredNodeAffinity: the Pod's nodeSelector and required terms, both to hold.
#[derive(Debug, Clone, Default)]
pub struct Required {
    selector: BTreeMap<String, String>,
    terms: Option<NodeSelector>,
}

impl Required {
    pub fn of(pod: &Pod) -> Required {
        let spec = pod.spec.as_ref();
        Required {
            selector: spec
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            terms: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
        }
    }

    /// Whether every node matches (no nodeSelector, no required terms).
    pub fn is_empty(&self) -> bool {
        self.selector.is_empty() && self.terms.is_none()
    }

    pub fn matches(&self, node: &NodeInfo) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = node.labels();
        self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self
                .terms
                .as_ref()
                .is_none_or(|t| selects(t, &node.name, labels))
    }
}

/// `Required::matches` remembered per node (by its index in the pass's nodes) for the Pods of
/// one template: node labels do not change within a pass, and reading them is mostly cache
/// misses at 5,000 nodes (a third of a NodeAffinity cycle before this).
#[derive(Debug)]
pub struct Memo(Vec<AtomicU8>);

impl Memo {
    const UNKNOWN: u8 = 0;
    const MATCHES: u8 = 1;
    const DOES_NOT: u8 = 2;

    pub fn new(nodes: usize) -> Memo {
        Memo((0..nodes).map(|_| AtomicU8::new(Self::UNKNOWN)).collect())
    }

    /// `required.matches(node)`, node `i` of the pass.
    pub fn matches(&self, required: &Required, i: usize, node: &NodeInfo) -> bool {
        let Some(seen) = self.0.get(i) else {
            return required.matches(node);
        };
        match seen.load(Ordering::Relaxed) {
            Self::MATCHES => true,
            Self::DOES_NOT => false,
            _ => {
                let m = required.matches(node);
                let v = if m { Self::MATCHES } else { Self::DOES_NOT };
                seen.store(v, Ordering::Relaxed);
                m
            }
        }
    }
}

/// The preferred terms with a weight and a non-empty preference (upstream skips the others).
pub fn preferred(pod: &Pod) -> Vec<PreferredSchedulingTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.weight != 0)
        .collect()
}

/// The summed weights of the preferred terms the node matches.
pub fn score(terms: &[PreferredSchedulingTerm], node: &NodeInfo) -> i64 {
    terms
        .iter()
        .filter(|t| term_selects(&t.preference, &node.name, node.labels()))
        .map(|t| i64::from(t.weight))
        .sum()
}
