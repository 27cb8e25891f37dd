//! A Pod's inter-pod affinity and anti-affinity terms, parsed once when the Pod is seen
//! (`PodInfo::affinity`) and matched by InterPodAffinity (`plugins::interpod`).

use crate::FastSet;
use k8s_openapi::api::core::v1::{
    Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
};
use keelson_apimachinery::labels::{LabelSelector, Operator, Requirement};
use std::collections::{BTreeMap, HashMap};

/// One PodAffinityTerm, parsed: the Pods it selects and the domain key.
#[derive(Debug, Clone)]
pub struct Term {
    namespaces: FastSet<String>,
    /// None for a nil namespaceSelector (it selects no namespace).
    namespace_selector: Option<LabelSelector>,
    selector: LabelSelector,
    pub topology_key: String,
}

impl Term {
    /// Upstream's newAffinityTerm, with matchLabelKeys and mismatchLabelKeys merged into the
    /// selector as the API server merges them (In / NotIn the owner's own value).
    fn new(owner: &Pod, t: &PodAffinityTerm) -> Option<Term> {
        let mut selector = match &t.label_selector {
            None => LabelSelector::nothing(),
            Some(s) => LabelSelector::from_json(&serde_json::to_value(s).ok()?).ok()?,
        };
        if t.label_selector.is_some() {
            selector = with_label_keys(
                selector,
                owner,
                t.match_label_keys.as_deref().unwrap_or_default(),
                t.mismatch_label_keys.as_deref().unwrap_or_default(),
            );
        }
        let namespace_selector = match &t.namespace_selector {
            None => None,
            Some(s) => Some(LabelSelector::from_json(&serde_json::to_value(s).ok()?).ok()?),
        };
        let listed = t.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && t.namespace_selector.is_none() {
            FastSet::from_iter([owner.metadata.namespace.clone().unwrap_or_default()])
        } else {
            listed.iter().cloned().collect()
        };
        Some(Term {
            namespaces,
            namespace_selector,
            selector,
            topology_key: t.topology_key.clone(),
        })
    }

    /// Whether a Pod in `namespace` (which has `ns_labels`) with `labels` is selected.
    pub fn selects(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        ns_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let in_namespace = self.namespaces.contains(namespace)
            || self
                .namespace_selector
                .as_ref()
                .zip(ns_labels)
                .is_some_and(|(s, l)| s.matches_map(l));
        in_namespace && self.selector.matches_map(labels)
    }

    /// Upstream's mergeAffinityTermNamespacesIfNotEmpty: the incoming Pod's namespaceSelector
    /// becomes the namespaces it selects now, so each match is a set lookup.
    pub fn merge_namespaces(&mut self, namespaces: &HashMap<String, BTreeMap<String, String>>) {
        if let Some(sel) = self.namespace_selector.take() {
            self.namespaces.extend(
                namespaces
                    .iter()
                    .filter(|(_, l)| sel.matches_map(l))
                    .map(|(n, _)| n.clone()),
            );
        }
    }
}

#[derive(Debug, Clone)]
pub struct Weighted {
    pub term: Term,
    pub weight: i64,
}

/// A Pod's affinity and anti-affinity terms.
#[derive(Debug, Clone, Default)]
pub struct Affinity {
    pub required: Vec<Term>,
    pub required_anti: Vec<Term>,
    pub preferred: Vec<Weighted>,
    pub preferred_anti: Vec<Weighted>,
}

impl Affinity {
    pub fn of(pod: &Pod) -> Affinity {
        let Some(a) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
            return Affinity::default();
        };
        let required = |terms: &Option<Vec<PodAffinityTerm>>| -> Vec<Term> {
            terms
                .iter()
                .flatten()
                .filter_map(|t| Term::new(pod, t))
                .collect()
        };
        let preferred = |terms: &Option<Vec<WeightedPodAffinityTerm>>| -> Vec<Weighted> {
            terms
                .iter()
                .flatten()
                .filter(|w| w.weight != 0)
                .filter_map(|w| {
                    Some(Weighted {
                        term: Term::new(pod, &w.pod_affinity_term)?,
                        weight: i64::from(w.weight),
                    })
                })
                .collect()
        };
        // An absent affinity or anti-affinity is one without terms.
        let (no_aff, no_anti) = (PodAffinity::default(), PodAntiAffinity::default());
        let aff = a.pod_affinity.as_ref().unwrap_or(&no_aff);
        let anti = a.pod_anti_affinity.as_ref().unwrap_or(&no_anti);
        Affinity {
            required: required(&aff.required_during_scheduling_ignored_during_execution),
            required_anti: required(&anti.required_during_scheduling_ignored_during_execution),
            preferred: preferred(&aff.preferred_during_scheduling_ignored_during_execution),
            preferred_anti: preferred(&anti.preferred_during_scheduling_ignored_during_execution),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.required_anti.is_empty()
            && self.preferred.is_empty()
            && self.preferred_anti.is_empty()
    }
}

/// A selector with the owner's values of `match_keys` (In) and `mismatch_keys` (NotIn) added,
/// as upstream merges matchLabelKeys and mismatchLabelKeys; keys the owner lacks are skipped.
pub fn with_label_keys(
    selector: LabelSelector,
    owner: &Pod,
    match_keys: &[String],
    mismatch_keys: &[String],
) -> LabelSelector {
    if match_keys.is_empty() && mismatch_keys.is_empty() {
        return selector;
    }
    let labels = owner.metadata.labels.as_ref();
    let mut reqs = selector.requirements().to_vec();
    for (keys, op) in [(match_keys, Operator::In), (mismatch_keys, Operator::NotIn)] {
        for key in keys {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                if let Ok(r) = Requirement::new(key, op, vec![v.clone()]) {
                    reqs.push(r);
                }
            }
        }
    }
    LabelSelector::from_requirements(reqs)
}
