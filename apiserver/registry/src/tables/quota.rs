//! ResourceQuota and PriorityClass rows, as upstream's printResourceQuota and
//! printPriorityClass (LimitRange prints as a Role: name and creation time).

use super::{age, age_col, col, name, name_col, Column};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn resource_quota_columns() -> Vec<Column> {
    vec![
        name_col(),
        age_col(),
        col("Request", "string", 0, "Request represents a minimum amount of cpu/memory that a container may consume."),
        col("Limit", "string", 0, "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
    ]
}

/// "resource: used/hard" for every resource in status.hard, sorted; limits.* in the Limit
/// column, everything else in Request. Before the controller's first sync both are empty.
pub(super) fn resource_quota_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    if let Some(hard) = obj.pointer("/status/hard").and_then(Value::as_object) {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for n in names {
            let used = obj
                .pointer("/status/used")
                .and_then(|u| u.get(n.as_str()))
                .map_or_else(|| "0".to_string(), quantity_text);
            let cell = format!("{n}: {used}/{}", quantity_text(&hard[n.as_str()]));
            if n.starts_with("limits") {
                limit.push(cell);
            } else {
                request.push(cell);
            }
        }
    }
    vec![
        name(obj),
        age(obj, now),
        json!(request.join(", ")),
        json!(limit.join(", ")),
    ]
}

fn quantity_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn priority_class_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Value", "integer", 0, "The value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
        col("Global-Default", "boolean", 0, "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."),
        age_col(),
        col("PreemptionPolicy", "string", 0, "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
    ]
}

pub(super) fn priority_class_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(obj),
        json!(obj.get("value").and_then(Value::as_i64).unwrap_or(0)),
        json!(obj
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
        age(obj, now),
        json!(obj
            .get("preemptionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("")),
    ]
}
