//! Node selector terms (a PersistentVolume's nodeAffinity, a Pod's required node affinity)
//! against a node's labels: the terms are ORed, a term's expressions ANDed, as upstream's
//! `nodeaffinity.NodeSelector`.

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use std::collections::BTreeMap;

/// Whether the node with `labels` (and `name`, for matchFields metadata.name) is selected.
pub fn selects(sel: &NodeSelector, name: &str, labels: &BTreeMap<String, String>) -> bool {
    sel.node_selector_terms
        .iter()
        .any(|term| term_selects(term, name, labels))
}

/// Whether one term (a required term, or a preferred term's preference) selects the node:
/// all its expressions and fields hold. An empty term selects nothing, as upstream.
pub fn term_selects(
    term: &NodeSelectorTerm,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    (!exprs.is_empty() || !fields.is_empty())
        && exprs.iter().all(|r| requirement(r, labels.get(&r.key)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then(|| name.to_string());
            requirement(r, value.as_ref())
        })
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &String| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) =
                (value.and_then(number), values.first().and_then(number))
            else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(v: serde_json::Value) -> NodeSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn terms_or_expressions_and() {
        let labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), "n1".to_string()),
            ("disk".to_string(), "ssd".to_string()),
        ]);
        let host = |h: &str| {
            sel(
                serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [h]}]}]}),
            )
        };
        assert!(selects(&host("n1"), "n1", &labels));
        assert!(!selects(&host("n2"), "n1", &labels));
        let both = sel(serde_json::json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]},
            {"matchExpressions": [{"key": "disk", "operator": "Exists"},
                {"key": "gpu", "operator": "DoesNotExist"}]}]}));
        assert!(selects(&both, "n1", &labels));
        let field = sel(serde_json::json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}));
        assert!(!selects(&field, "n1", &labels));
        assert!(!selects(
            &sel(serde_json::json!({"nodeSelectorTerms": [{}]})),
            "n1",
            &labels
        ));
    }
}
