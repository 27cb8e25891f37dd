//! autoscaling/v2 defaults (upstream SetDefaults_HorizontalPodAutoscaler and
//! SetDefaults_HorizontalPodAutoscalerBehavior).

use crate::json::{default, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn horizontal_pod_autoscaler(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "minReplicas", json!(1));
    let no_metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_metrics {
        // Upstream's DefaultCPUUtilization: an HPA without metrics scales on 80% CPU.
        let cpu = json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}});
        spec.insert("metrics".into(), json!([cpu]));
    }
    // As upstream, the rules are filled in only when a behavior is given: without one the
    // controller applies the same defaults itself, and the object stays as written.
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else {
        return;
    };
    let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    let down = json!({"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    for (direction, defaults) in [("scaleUp", up), ("scaleDown", down)] {
        let Some(rules) = object_mut(behavior, direction) else {
            continue;
        };
        if let Value::Object(defaults) = defaults {
            for (k, v) in defaults {
                default(rules, &k, v);
            }
        }
    }
}
