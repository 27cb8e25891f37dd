//! Upstream's ValidatePodDisruptionBudget: minAvailable or maxUnavailable (not both), each a
//! non-negative count or a percentage of at most 100%, a valid selector and eviction policy.

use super::field_checks::{label_selector, one_of};
use crate::cause::Cause;
use crate::path::Path;
use serde_json::Value;

/// Upstream's ValidatePositiveIntOrPercent and IsNotMoreThan100Percent.
fn int_or_percent(v: &Value, path: &Path, out: &mut Vec<Cause>) {
    match v {
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
            out.push(Cause::invalid(
                path,
                v,
                "must be greater than or equal to 0",
            ));
        }
        Value::Number(_) => {}
        Value::String(s) => {
            let pct = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok());
            match pct {
                None => out.push(Cause::invalid(
                    path,
                    v,
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )),
                Some(p) if p > 100 => {
                    out.push(Cause::invalid(path, v, "must not be greater than 100%"))
                }
                Some(_) => {}
            }
        }
        _ => out.push(Cause::invalid(
            path,
            v,
            "must be an integer or a percentage",
        )),
    }
}

pub(crate) fn pod_disruption_budget(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let Some(spec) = obj.get("spec") else { return };
    let field = |k: &str| spec.get(k).filter(|v| !v.is_null());
    if let (Some(_), Some(_)) = (field("minAvailable"), field("maxUnavailable")) {
        out.push(Cause::invalid(
            &path,
            spec,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for k in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = field(k) {
            int_or_percent(v, &path.child(k), out);
        }
    }
    if let Some(sel) = field("selector") {
        label_selector(sel, &path.child("selector"), out);
    }
    one_of(
        spec,
        "unhealthyPodEvictionPolicy",
        &["IfHealthyBudget", "AlwaysAllow"],
        false,
        &path,
        out,
    );
}
