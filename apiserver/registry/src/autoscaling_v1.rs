//! autoscaling/v1 HorizontalPodAutoscaler, converted to and from the stored autoscaling/v2
//! form, because `kubectl autoscale` (1.32) still writes v1. As upstream, v1 carries only the
//! CPU utilization target; the v2 fields it cannot express travel in the
//! autoscaling.alpha.kubernetes.io annotations, so a v1 read-modify-write loses nothing.

use crate::json::at;
use serde_json::{json, Map, Value};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

/// A v1 object (or any Value) as the v2 object to store.
pub fn to_v2(v1: &Value) -> Value {
    let mut obj = v1.clone();
    let Some(o) = obj.as_object_mut() else {
        return obj;
    };
    o.insert("apiVersion".into(), json!("autoscaling/v2"));
    let mut notes = take_annotations(o);
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let mut metrics: Vec<Value> = Vec::new();
        if let Some(n) = spec
            .remove("targetCPUUtilizationPercentage")
            .filter(|n| !n.is_null())
        {
            metrics.push(cpu_metric("target", "Utilization", n));
        }
        metrics.extend(from_json(notes.remove(METRICS)));
        if !metrics.is_empty() {
            spec.insert("metrics".into(), json!(metrics));
        }
        if let Some(b) = notes
            .remove(BEHAVIOR)
            .and_then(|b| serde_json::from_str(b.as_str()?).ok())
        {
            spec.insert("behavior".into(), b);
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let mut current: Vec<Value> = Vec::new();
        if let Some(n) = status
            .remove("currentCPUUtilizationPercentage")
            .filter(|n| !n.is_null())
        {
            current.push(cpu_metric("current", "", n));
        }
        current.extend(from_json(notes.remove(CURRENT_METRICS)));
        if !current.is_empty() {
            status.insert("currentMetrics".into(), json!(current));
        }
        let conditions = from_json(notes.remove(CONDITIONS));
        if !conditions.is_empty() {
            status.insert("conditions".into(), json!(conditions));
        }
    }
    obj
}

/// A stored v2 object as a v1 client reads it.
pub fn to_v1(v2: &Value) -> Value {
    let mut obj = v2.clone();
    let Some(o) = obj.as_object_mut() else {
        return obj;
    };
    o.insert("apiVersion".into(), json!("autoscaling/v1"));
    let mut notes: Vec<(&str, String)> = Vec::new();
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = take_array(spec, "metrics");
        let (cpu, rest) = split_cpu(metrics, "target");
        if let Some(n) = cpu {
            spec.insert("targetCPUUtilizationPercentage".into(), n);
        }
        push_note(&mut notes, METRICS, rest);
        if let Some(b) = spec.remove("behavior").filter(|b| !b.is_null()) {
            notes.push((BEHAVIOR, b.to_string()));
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let (cpu, rest) = split_cpu(take_array(status, "currentMetrics"), "current");
        if let Some(n) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), n);
        }
        push_note(&mut notes, CURRENT_METRICS, rest);
        push_note(&mut notes, CONDITIONS, take_array(status, "conditions"));
    }
    if !notes.is_empty() {
        let meta = o.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let a = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = a.as_object_mut() {
                for (k, v) in notes {
                    a.insert(k.into(), json!(v));
                }
            }
        }
    }
    obj
}

fn cpu_metric(side: &str, target_type: &str, n: Value) -> Value {
    let value = match target_type {
        "" => json!({ "averageUtilization": n }),
        t => json!({ "type": t, "averageUtilization": n }),
    };
    json!({"type": "Resource", "resource": {"name": "cpu", side: value}})
}

/// The CPU utilization metric v1 has a field for, and every other metric.
fn split_cpu(metrics: Vec<Value>, side: &str) -> (Option<Value>, Vec<Value>) {
    let mut cpu = None;
    let mut rest = Vec::new();
    for m in metrics {
        let is_cpu = m.get("type") == Some(&json!("Resource"))
            && at(&m, &["resource", "name"]) == Some(&json!("cpu"));
        let utilization = at(&m, &["resource", side, "averageUtilization"]).cloned();
        match (is_cpu && cpu.is_none(), utilization) {
            (true, Some(n)) => cpu = Some(n),
            _ => rest.push(m),
        }
    }
    (cpu, rest)
}

fn take_array(m: &mut Map<String, Value>, key: &str) -> Vec<Value> {
    match m.remove(key) {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    }
}

fn push_note(notes: &mut Vec<(&'static str, String)>, key: &'static str, values: Vec<Value>) {
    if !values.is_empty() {
        notes.push((key, Value::Array(values).to_string()));
    }
}

/// The conversion annotations, removed from the object (they are v1's, not v2's).
fn take_annotations(o: &mut Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    let annotations = o
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut);
    if let Some(a) = annotations {
        for key in [METRICS, BEHAVIOR, CONDITIONS, CURRENT_METRICS] {
            if let Some(v) = a.remove(key) {
                out.insert(key.into(), v);
            }
        }
    }
    out
}

fn from_json(v: Option<Value>) -> Vec<Value> {
    v.as_ref()
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_autoscales_v1_object_becomes_a_cpu_metric_and_back() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"kind": "Deployment",
            "name": "web", "apiVersion": "apps/v1"}, "minReplicas": 1, "maxReplicas": 5,
            "targetCPUUtilizationPercentage": 50}, "status": {"currentReplicas": 0,
            "desiredReplicas": 0}});
        let v2 = to_v2(&v1);
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}])
        );
        assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());
        assert_eq!(
            to_v1(&v2),
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"}, "spec": v1["spec"], "status": v1["status"]})
        );
    }

    #[test]
    fn what_v1_cannot_express_survives_a_round_trip_in_annotations() {
        let v2 = json!({"metadata": {"name": "web"}, "spec": {"maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "memory",
                "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": 20}}}],
                "conditions": [{"type": "AbleToScale", "status": "True"}]}});
        let v1 = to_v1(&v2);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 20);
        assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
        assert!(v1["metadata"]["annotations"][METRICS].is_string());
        let back = to_v2(&v1);
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(back["status"], v2["status"]);
        assert_eq!(back["metadata"]["annotations"], json!({}));
    }
}
