//! PodDisruptionBudget rows, as upstream's printPodDisruptionBudget.

use super::{age, age_col, col, name, name_col, Column};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn pdb_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Min Available",
            "string",
            0,
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "string",
            0,
            "The maximum number of pods that may be unavailable.",
        ),
        col(
            "Allowed Disruptions",
            "integer",
            0,
            "Calculated number of pods that may be disrupted at this time.",
        ),
        age_col(),
    ]
}

/// An IntOrString as kubectl prints it, N/A when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".into(),
    }
}

pub(super) fn pdb_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec = obj.get("spec");
    vec![
        name(obj),
        json!(int_or_string(spec.and_then(|s| s.get("minAvailable")))),
        json!(int_or_string(spec.and_then(|s| s.get("maxUnavailable")))),
        json!(obj
            .pointer("/status/disruptionsAllowed")
            .and_then(Value::as_i64)
            .unwrap_or(0)),
        age(obj, now),
    ]
}
