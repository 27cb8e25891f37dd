//! autoscaling/v2 HorizontalPodAutoscaler (upstream ValidateHorizontalPodAutoscaler): the
//! target reference, the replica bounds, each metric's source and target, the behavior rules.

use super::field_checks::{at_least, int_field, one_of};
use crate::cause::Cause;
use crate::json::{items, str_at};
use crate::path::Path;
use serde_json::{json, Value};

const METRIC_TYPES: [&str; 5] = [
    "Object",
    "Pods",
    "Resource",
    "External",
    "ContainerResource",
];
const TARGET_TYPES: [&str; 3] = ["Utilization", "Value", "AverageValue"];
/// Upstream's MaxPeriodSeconds and MaxStabilizationWindowSeconds.
const MAX_PERIOD: i64 = 1800;
const MAX_WINDOW: i64 = 3600;

pub(crate) fn horizontal_pod_autoscaler(obj: &Value, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let target = spec.get("scaleTargetRef").unwrap_or(&empty);
    object_reference(target, &path.child("scaleTargetRef"), out);
    let msg = "must be greater than or equal to 1";
    let min = at_least(spec, "minReplicas", 1, msg, &path, out);
    let max = int_field(spec, "maxReplicas", &path, out).unwrap_or(0);
    let max_path = path.child("maxReplicas");
    if max < 1 {
        out.push(Cause::invalid(
            &max_path,
            &json!(max),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|m| max < m) {
        let msg = "must be greater than or equal to `minReplicas`";
        out.push(Cause::invalid(&max_path, &json!(max), msg));
    }
    for (i, m) in items(spec, "metrics").iter().enumerate() {
        metric(m, &path.child("metrics").index(i), out);
    }
    if let Some(behavior) = spec.get("behavior").filter(|b| b.is_object()) {
        let bp = path.child("behavior");
        for direction in ["scaleUp", "scaleDown"] {
            if let Some(rules) = behavior.get(direction).filter(|r| r.is_object()) {
                scaling_rules(rules, &bp.child(direction), out);
            }
        }
    }
}

/// ValidateCrossVersionObjectReference: kind and name required, each a valid path segment.
fn object_reference(r: &Value, path: &Path, out: &mut Vec<Cause>) {
    for key in ["kind", "name"] {
        let value = str_at(r, key);
        if value.is_empty() {
            out.push(Cause::required(path.child(key), ""));
        }
        for msg in path_segment(value) {
            out.push(Cause::invalid(path.child(key), &json!(value), msg));
        }
    }
}

/// IsValidPathSegmentName: the name goes into a URL path.
fn path_segment(s: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if s == "." || s == ".." {
        errs.push(if s == "." {
            "may not be '.'"
        } else {
            "may not be '..'"
        });
    }
    if s.contains('/') {
        errs.push("may not contain '/'");
    }
    if s.contains('%') {
        errs.push("may not contain '%'");
    }
    errs
}

fn metric(m: &Value, path: &Path, out: &mut Vec<Cause>) {
    one_of(m, "type", &METRIC_TYPES, true, path, out);
    let source = match str_at(m, "type") {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return,
    };
    let Some(src) = m.get(source).filter(|s| s.is_object()) else {
        let msg = "must populate information for the given metric source";
        out.push(Cause::required(path.child(source), msg));
        return;
    };
    let sp = path.child(source);
    let target = src.get("target").filter(|t| t.is_object());
    match source {
        "resource" | "containerResource" => {
            if str_at(src, "name").is_empty() {
                out.push(Cause::required(
                    sp.child("name"),
                    "must specify a resource name",
                ));
            }
            if source == "containerResource" && str_at(src, "container").is_empty() {
                let msg = "must specify a container";
                out.push(Cause::required(sp.child("container"), msg));
            }
            let has = |k: &str| target.and_then(|t| t.get(k)).is_some_and(|v| !v.is_null());
            if !has("averageValue") && !has("averageUtilization") {
                let msg = "must set either a target raw value or a target utilization";
                out.push(Cause::required(
                    sp.child("target").child("averageUtilization"),
                    msg,
                ));
            }
        }
        _ => {
            if src.get("metric").and_then(|m| m.get("name")).is_none() {
                out.push(Cause::required(
                    sp.child("metric").child("name"),
                    "must specify a metric name",
                ));
            }
        }
    }
    match target {
        Some(t) => metric_target(t, &sp.child("target"), out),
        None => out.push(Cause::required(
            sp.child("target"),
            "must specify a metric target",
        )),
    }
}

/// ValidateMetricTarget: a known type, and for Utilization a positive averageUtilization.
fn metric_target(t: &Value, path: &Path, out: &mut Vec<Cause>) {
    one_of(t, "type", &TARGET_TYPES, true, path, out);
    let msg = "must be greater than 0";
    let utilization = at_least(t, "averageUtilization", 1, msg, path, out);
    if str_at(t, "type") == "Utilization" && utilization.is_none() {
        let msg = "must set either a target raw value or a target utilization";
        out.push(Cause::required(path.child("averageUtilization"), msg));
    }
}

/// validateScalingRules: the window, the select policy, and at least one valid policy.
fn scaling_rules(rules: &Value, path: &Path, out: &mut Vec<Cause>) {
    if let Some(w) = int_field(rules, "stabilizationWindowSeconds", path, out) {
        let wp = path.child("stabilizationWindowSeconds");
        if w < 0 {
            out.push(Cause::invalid(
                &wp,
                &json!(w),
                "must be greater than or equal to zero",
            ));
        } else if w > MAX_WINDOW {
            let msg = format!("must be less than or equal to {MAX_WINDOW}");
            out.push(Cause::invalid(&wp, &json!(w), &msg));
        }
    }
    one_of(
        rules,
        "selectPolicy",
        &["Max", "Min", "Disabled"],
        false,
        path,
        out,
    );
    let policies = items(rules, "policies");
    if policies.is_empty() {
        out.push(Cause::required(
            path.child("policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let pp = path.child("policies").index(i);
        one_of(p, "type", &["Pods", "Percent"], true, &pp, out);
        let period = int_field(p, "periodSeconds", &pp, out).unwrap_or(0);
        if period <= 0 {
            let msg = "must be greater than zero";
            out.push(Cause::invalid(
                pp.child("periodSeconds"),
                &json!(period),
                msg,
            ));
        } else if period > MAX_PERIOD {
            let msg = format!("must be less than or equal to {MAX_PERIOD}");
            out.push(Cause::invalid(
                pp.child("periodSeconds"),
                &json!(period),
                &msg,
            ));
        }
        let value = int_field(p, "value", &pp, out).unwrap_or(0);
        if value <= 0 {
            out.push(Cause::invalid(
                pp.child("value"),
                &json!(value),
                "must be greater than zero",
            ));
        }
    }
}
