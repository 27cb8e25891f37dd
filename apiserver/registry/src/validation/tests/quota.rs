//! ResourceQuota, LimitRange and PriorityClass: what upstream refuses, and LimitRange's
//! defaulting of an item's default and defaultRequest.

use super::{assert_has, causes, fields};
use crate::{apply_defaults, validate};
use serde_json::json;

#[test]
fn quotas_need_quantities_known_scopes_and_whole_counts() {
    let got = fields(
        "ResourceQuota",
        json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {
            "hard": {"pods": "1.5", "requests.cpu": "-1", "limits.memory": "lots"},
            "scopes": ["Everything"]}}),
    );
    assert_has(
        &got,
        &[
            ("FieldValueInvalid", "spec.hard[pods]"),
            ("FieldValueInvalid", "spec.hard[requests.cpu]"),
            ("FieldValueInvalid", "spec.hard[limits.memory]"),
            ("FieldValueNotSupported", "spec.scopes[0]"),
        ],
    );
    let ok = json!({"metadata": {"name": "q", "namespace": "d"}, "spec": {
        "hard": {"pods": "2", "requests.cpu": "500m", "count/deployments.apps": "3"},
        "scopes": ["NotTerminating"]}});
    assert!(causes("ResourceQuota", ok).is_empty());
}

#[test]
fn limit_ranges_order_min_default_max() {
    let got = causes(
        "LimitRange",
        json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"limits": [
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "Node"},
        ]}}),
    );
    let text: Vec<String> = got
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert!(text.contains(&r#"spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1"#.to_string()), "{text:?}");
    assert!(
        text.contains(
            &"spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'"
                .to_string()
        ),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("spec.limits[2].type: Unsupported value")),
        "{text:?}"
    );
}

#[test]
fn a_container_items_default_comes_from_max_and_its_request_from_the_default() {
    let mut lr = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]}});
    apply_defaults("LimitRange", &mut lr);
    let item = &lr["spec"]["limits"][0];
    assert_eq!(item["default"], json!({"cpu": "2"}));
    assert_eq!(
        item["defaultRequest"],
        json!({"cpu": "2", "memory": "64Mi"})
    );
}

#[test]
fn priority_classes_reserve_system_names_and_keep_their_value() {
    let pc = |name: &str, value: i64| json!({"metadata": {"name": name}, "value": value});
    let got = fields("PriorityClass", pc("system-mine", 5));
    assert_has(&got, &[("FieldValueForbidden", "metadata.name")]);
    let got = fields("PriorityClass", pc("huge", 2_000_000_000));
    assert_has(&got, &[("FieldValueForbidden", "value")]);
    assert!(causes("PriorityClass", pc("system-node-critical", 2_000_001_000)).is_empty());
    let mut old = pc("high", 1000);
    apply_defaults("PriorityClass", &mut old);
    assert_eq!(old["preemptionPolicy"], "PreemptLowerPriority");
    let mut new = pc("high", 7);
    apply_defaults("PriorityClass", &mut new);
    let got: Vec<String> = validate("PriorityClass", &new, Some(&old))
        .iter()
        .map(|c| c.field.clone())
        .collect();
    assert_eq!(got, ["value"]);
}
