//! Upstream's ValidateResourceQuota, ValidateLimitRange and ValidatePriorityClass: quantities
//! that parse, known scopes and types, min <= default <= max, reserved system class names.

use crate::cause::Cause;
use crate::path::Path;
use crate::quantity;
use serde_json::{json, Value};

const SCOPES: &[&str] = &[
    "BestEffort",
    "CrossNamespacePodAffinity",
    "NotBestEffort",
    "NotTerminating",
    "PriorityClass",
    "Terminating",
];
const LIMIT_TYPES: &[&str] = &["Container", "PersistentVolumeClaim", "Pod"];

/// Each entry of a ResourceList: a quantity, not negative; object counts whole.
fn resource_list(list: Option<&Value>, path: &Path, counts_whole: bool, out: &mut Vec<Cause>) {
    let Some(list) = list.and_then(Value::as_object) else {
        return;
    };
    for (name, v) in list {
        let at = path.key(name);
        let Some(q) = v.as_str().and_then(quantity::parse_milli) else {
            out.push(Cause::invalid(&at, v, "must be a valid quantity"));
            continue;
        };
        if q < 0 {
            out.push(Cause::invalid(&at, v, "must be greater than or equal to 0"));
        } else if counts_whole
            && keelson_apimachinery::quota::is_object_count(name)
            && q % 1000 != 0
        {
            out.push(Cause::invalid(&at, v, "must be an integer"));
        }
    }
}

pub(crate) fn resource_quota(obj: &Value, out: &mut Vec<Cause>) {
    let spec = Path::root().child("spec");
    resource_list(obj.pointer("/spec/hard"), &spec.child("hard"), true, out);
    let scopes = obj.pointer("/spec/scopes").and_then(Value::as_array);
    for (i, s) in scopes.into_iter().flatten().enumerate() {
        if !s.as_str().is_some_and(|s| SCOPES.contains(&s)) {
            out.push(Cause::not_supported(
                spec.child("scopes").index(i),
                s,
                SCOPES,
            ));
        }
    }
    let exprs = obj
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array);
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let at = spec
            .child("scopeSelector")
            .child("matchExpressions")
            .index(i);
        let name = e.get("scopeName").unwrap_or(&Value::Null);
        if !name.as_str().is_some_and(|s| SCOPES.contains(&s)) {
            out.push(Cause::not_supported(at.child("scopeName"), name, SCOPES));
        }
        let op = e.get("operator").unwrap_or(&Value::Null);
        let ops = ["DoesNotExist", "Exists", "In", "NotIn"];
        if !op.as_str().is_some_and(|s| ops.contains(&s)) {
            out.push(Cause::not_supported(at.child("operator"), op, &ops));
        }
    }
    let status = Path::root().child("status");
    resource_list(
        obj.pointer("/status/hard"),
        &status.child("hard"),
        false,
        out,
    );
    resource_list(
        obj.pointer("/status/used"),
        &status.child("used"),
        false,
        out,
    );
}

pub(crate) fn limit_range(obj: &Value, out: &mut Vec<Cause>) {
    let items = obj.pointer("/spec/limits").and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        let at = Path::root().child("spec").child("limits").index(i);
        let kind = item.get("type").unwrap_or(&Value::Null);
        if !kind.as_str().is_some_and(|k| LIMIT_TYPES.contains(&k)) {
            out.push(Cause::not_supported(at.child("type"), kind, LIMIT_TYPES));
        }
        for key in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            resource_list(item.get(key), &at.child(key), false, out);
        }
        if kind.as_str() == Some("Pod") {
            for key in ["default", "defaultRequest"] {
                if item
                    .get(key)
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    out.push(Cause::forbidden(
                        at.child(key),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        ordered(item, &at, out);
    }
}

/// min <= defaultRequest <= default <= max, per resource, with upstream's messages.
fn ordered(item: &Value, at: &Path, out: &mut Vec<Cause>) {
    let get = |key: &str, name: &str| {
        let v = item.get(key)?.get(name)?;
        Some((v.as_str()?.to_string(), quantity::parse_milli(v.as_str()?)?))
    };
    let mut names: Vec<&String> = ["max", "min", "default", "defaultRequest"]
        .iter()
        .filter_map(|k| item.get(*k).and_then(Value::as_object))
        .flat_map(|m| m.keys())
        .collect();
    names.sort();
    names.dedup();
    let pairs: [(&str, &str, &str, &str); 5] = [
        (
            "min",
            "max",
            "min",
            "min value {a} is greater than max value {b}",
        ),
        (
            "default",
            "max",
            "default",
            "default value {a} is greater than max value {b}",
        ),
        (
            "defaultRequest",
            "max",
            "defaultRequest",
            "default request value {a} is greater than max value {b}",
        ),
        (
            "min",
            "default",
            "default",
            "min value {a} is greater than default value {b}",
        ),
        (
            "defaultRequest",
            "default",
            "defaultRequest",
            "default request value {a} is greater than default limit value {b}",
        ),
    ];
    for name in names {
        for (lo, hi, field, template) in pairs {
            if let (Some((a, qa)), Some((b, qb))) = (get(lo, name), get(hi, name)) {
                if qa > qb {
                    let detail = template.replace("{a}", &a).replace("{b}", &b);
                    let shown = if field == lo { a } else { b };
                    out.push(Cause::invalid(
                        at.child(field).key(name),
                        &json!(shown),
                        &detail,
                    ));
                }
            }
        }
    }
}

/// The classes every cluster has, with their fixed values.
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];
/// Upstream's HighestUserDefinablePriority.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

pub(crate) fn priority_class(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    if name.starts_with("system-") {
        match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _)| *n == name) {
            Some((_, v)) if *v == value => {}
            Some((_, v)) => out.push(Cause::forbidden(
                Path::root().child("metadata").child("name"),
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: value of {name} PriorityClass must be {v}"),
            )),
            None => out.push(Cause::forbidden(
                Path::root().child("metadata").child("name"),
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: {name} is not a known system priority class"),
            )),
        }
    } else if value > HIGHEST_USER_PRIORITY {
        out.push(Cause::forbidden(
            Path::root().child("value"),
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ));
    }
    let policy = obj.get("preemptionPolicy").unwrap_or(&Value::Null);
    let policies = ["Never", "PreemptLowerPriority"];
    if !policy.as_str().is_some_and(|p| policies.contains(&p)) {
        out.push(Cause::not_supported(
            Path::root().child("preemptionPolicy"),
            policy,
            &policies,
        ));
    }
    if let Some(old) = old {
        if old.get("value") != obj.get("value") {
            out.push(Cause::forbidden(
                Path::root().child("value"),
                "may not be changed in an update.",
            ));
        }
        if old.get("preemptionPolicy") != obj.get("preemptionPolicy") {
            out.push(Cause::invalid(
                Path::root().child("preemptionPolicy"),
                policy,
                "field is immutable",
            ));
        }
    }
}
