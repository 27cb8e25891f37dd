//! NodeAffinity, as upstream's plugin: nodeSelector and the required node affinity terms
//! filter (terms ORed, expressions ANDed; matchFields on metadata.name), the preferred terms'
//! weights score.

use crate::node_info::NodeInfo;
use k8s_openapi::api::core::v1::{NodeSelector, Pod, PreferredSchedulingTerm};
use keelson_apimachinery::node_affinity::{selects, term_selects};
use std::collections::BTreeMap;

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

    pub fn matches(&self, node: &NodeInfo) -> bool {
        if self.selector.is_empty() && self.terms.is_none() {
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
