use super::{causes, fields, pair};
use crate::apply_defaults;
use serde_json::{json, Value};

fn hpa(spec: Value) -> Value {
    json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn cpu(utilization: Value) -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}}])
}

#[test]
fn kubectl_autoscales_output_is_valid_and_defaulted() {
    let mut obj = hpa(
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
        "name": "web"}, "maxReplicas": 5}),
    );
    assert_eq!(causes("HorizontalPodAutoscaler", obj.clone()), vec![]);
    apply_defaults("HorizontalPodAutoscaler", &mut obj);
    assert_eq!(obj["spec"]["minReplicas"], 1);
    assert_eq!(obj["spec"]["metrics"], cpu(json!(80)));
    assert!(
        obj["spec"].get("behavior").is_none(),
        "filled only when given"
    );
}

#[test]
fn a_given_behavior_gets_upstreams_rules() {
    let mut obj = hpa(json!({"behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}));
    apply_defaults("HorizontalPodAutoscaler", &mut obj);
    let b = &obj["spec"]["behavior"];
    assert_eq!(b["scaleUp"]["stabilizationWindowSeconds"], 0);
    assert_eq!(b["scaleUp"]["selectPolicy"], "Max");
    assert_eq!(
        b["scaleUp"]["policies"],
        json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
               {"type": "Percent", "value": 100, "periodSeconds": 15}])
    );
    assert_eq!(b["scaleDown"]["stabilizationWindowSeconds"], 60, "kept");
    assert_eq!(
        b["scaleDown"]["policies"],
        json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
    );
}

#[test]
fn replica_bounds_target_and_metrics_follow_upstream() {
    let bad = hpa(
        json!({"scaleTargetRef": {"name": "a/b"}, "minReplicas": 3, "maxReplicas": 2,
        "metrics": cpu(json!(0))}),
    );
    let got = causes("HorizontalPodAutoscaler", bad);
    let pairs: Vec<(String, String, String)> = got
        .into_iter()
        .map(|c| (c.reason, c.field, c.message))
        .collect();
    let want = [
        (
            "FieldValueRequired",
            "spec.scaleTargetRef.kind",
            "Required value",
        ),
        (
            "FieldValueInvalid",
            "spec.scaleTargetRef.name",
            "may not contain '/'",
        ),
        (
            "FieldValueInvalid",
            "spec.maxReplicas",
            "must be greater than or equal to `minReplicas`",
        ),
        (
            "FieldValueInvalid",
            "spec.metrics[0].resource.target.averageUtilization",
            "must be greater than 0",
        ),
    ];
    for (reason, field, message) in want {
        assert!(
            pairs
                .iter()
                .any(|(r, f, m)| r == reason && f == field && m.contains(message)),
            "missing {reason} {field} {message} in {pairs:?}"
        );
    }
    let zero = hpa(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "minReplicas": 0, "maxReplicas": 0}),
    );
    assert_eq!(
        fields("HorizontalPodAutoscaler", zero),
        vec![
            pair("FieldValueInvalid", "spec.minReplicas"),
            pair("FieldValueInvalid", "spec.maxReplicas")
        ]
    );
    let no_utilization = hpa(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization"}}}]}),
    );
    let got = fields("HorizontalPodAutoscaler", no_utilization);
    assert!(
        got.contains(&pair(
            "FieldValueRequired",
            "spec.metrics[0].resource.target.averageUtilization"
        )),
        "{got:?}"
    );
    let bad_policy = hpa(
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 3, "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 0,
        "periodSeconds": 1801}]}}}),
    );
    assert_eq!(
        fields("HorizontalPodAutoscaler", bad_policy),
        vec![
            pair(
                "FieldValueInvalid",
                "spec.behavior.scaleUp.policies[0].periodSeconds"
            ),
            pair(
                "FieldValueInvalid",
                "spec.behavior.scaleUp.policies[0].value"
            )
        ]
    );
}
