//! HorizontalPodAutoscaler rows (upstream printHorizontalPodAutoscaler and formatHPAMetrics).

use super::{age, age_col, col, name, name_col, Column};
use crate::json::{at, int_at, items, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn hpa_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Reference", "string", 0, "reference to target resource"),
        col(
            "Targets",
            "string",
            0,
            "the current and the target of the metrics",
        ),
        col("MinPods", "string", 0, "minimum number of replicas"),
        col("MaxPods", "integer", 0, "maximum number of replicas"),
        col("Replicas", "string", 0, "the current replicas"),
        age_col(),
    ]
}

pub(super) fn hpa_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let target = spec.get("scaleTargetRef").unwrap_or(&Value::Null);
    let reference = format!("{}/{}", str_at(target, "kind"), str_at(target, "name"));
    let min = int_at(spec, "minReplicas").map_or("<unset>".to_string(), |n| n.to_string());
    let status = obj.get("status").unwrap_or(&Value::Null);
    let replicas = int_at(status, "currentReplicas").unwrap_or(0);
    vec![
        name(obj),
        json!(reference),
        json!(targets(
            items(spec, "metrics"),
            items(status, "currentMetrics")
        )),
        json!(min),
        json!(int_at(spec, "maxReplicas").unwrap_or(0)),
        json!(replicas),
        age(obj, now),
    ]
}

/// Each metric as "current/target", the current value read from status.currentMetrics at the
/// same index; two at most, then "+ N more...".
fn targets(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".into();
    }
    let shown: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| metric(spec, statuses.get(i)))
        .collect();
    let (max, count) = (2, shown.len());
    let head = shown
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match count > max {
        true => format!("{head} + {} more...", count - max),
        false => head,
    }
}

fn metric(spec: &Value, status: Option<&Value>) -> String {
    let unknown = || "<unknown>".to_string();
    let quantity = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let kind = str_at(spec, "type");
    let source = match kind {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return "<unknown type>".into(),
    };
    let current = status
        .and_then(|s| s.get(source))
        .and_then(|s| s.get("current"));
    let target = at(spec, &[source, "target"]).unwrap_or(&Value::Null);
    let value = |key: &str| {
        let now = quantity(current.and_then(|c| c.get(key))).unwrap_or_else(unknown);
        format!("{now}/{}", quantity(target.get(key)).unwrap_or_default())
    };
    match kind {
        "Resource" | "ContainerResource" => {
            let res = str_at(spec.get(source).unwrap_or(&Value::Null), "name");
            if target.get("averageValue").is_some() {
                return format!("{res}: {}", value("averageValue"));
            }
            let percent = |v: Option<&Value>| v.and_then(Value::as_i64).map(|n| format!("{n}%"));
            let now = percent(current.and_then(|c| c.get("averageUtilization")));
            let want = percent(target.get("averageUtilization")).unwrap_or("<auto>".into());
            format!("{res}: {}/{want}", now.unwrap_or_else(unknown))
        }
        "Pods" => value("averageValue"),
        _ if target.get("averageValue").is_some() => {
            format!("{} (avg)", value("averageValue"))
        }
        _ => value("value"),
    }
}
