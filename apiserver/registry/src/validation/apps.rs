//! Deployment, ReplicaSet and DaemonSet rules (apps/validation).

use super::field_checks::{
    immutable, label_selector, labels, non_negative, one_of, selector_is_empty,
};
use super::pod::pod_spec;
use crate::cause::Cause;
use crate::json::{at, str_at};
use crate::path::Path;
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

pub(crate) fn deployment(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    replica_spec(spec, &path, out);
    pod_template(spec, "deployment", &path, out);
    strategy(spec, &path.child("strategy"), out);
    non_negative(spec, "revisionHistoryLimit", &path, out);
    let deadline = spec.get("progressDeadlineSeconds").and_then(Value::as_i64);
    let min_ready = spec
        .get("minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(d) = deadline {
        if d <= min_ready {
            let msg = "must be greater than minReadySeconds";
            out.push(Cause::invalid(
                path.child("progressDeadlineSeconds"),
                &json!(d),
                msg,
            ));
        }
    }
    selector_update(spec, old, &path, out);
}

pub(crate) fn replica_set(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    replica_spec(spec, &path, out);
    pod_template(spec, "deployment", &path, out);
    selector_update(spec, old, &path, out);
}

/// ValidateDaemonSet: selector and template as for a ReplicaSet, and an update strategy.
pub(crate) fn daemon_set(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    non_negative(spec, "minReadySeconds", &path, out);
    non_negative(spec, "revisionHistoryLimit", &path, out);
    non_negative(spec, "templateGeneration", &path, out);
    pod_template(spec, "daemonset", &path, out);
    daemon_set_strategy(spec, &path.child("updateStrategy"), out);
    selector_update(spec, old, &path, out);
}

fn daemon_set_strategy(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let empty = json!({});
    let strategy = spec.get("updateStrategy").unwrap_or(&empty);
    one_of(
        strategy,
        "type",
        &["OnDelete", "RollingUpdate"],
        true,
        path,
        out,
    );
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match (str_at(strategy, "type"), rolling) {
        ("RollingUpdate", None) => out.push(Cause::required(path.child("rollingUpdate"), "")),
        ("RollingUpdate", Some(r)) => rolling_update(r, &path.child("rollingUpdate"), out),
        _ => {}
    }
}

/// apps/v1 selectors may not change after creation.
fn selector_update(spec: &Value, old: Option<&Value>, path: &Path, out: &mut Vec<Cause>) {
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        let new = spec.get("selector").unwrap_or(&Value::Null);
        let old = old_spec.get("selector").unwrap_or(&Value::Null);
        immutable(new, old, &path.child("selector"), out);
    }
}

/// What Deployment and ReplicaSet share besides the template: replicas and minReadySeconds.
fn replica_spec(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    non_negative(spec, "replicas", path, out);
    non_negative(spec, "minReadySeconds", path, out);
}

/// What every apps/v1 workload has: a selector, and a pod template it matches that restarts
/// its containers. `kind` names the workload in upstream's messages ("deployment", "daemonset").
pub(super) fn pod_template(spec: &Value, kind: &str, path: &Path, out: &mut Vec<Cause>) {
    let sel_path = path.child("selector");
    let selector = spec.get("selector").filter(|s| !s.is_null());
    match selector {
        None => out.push(Cause::required(&sel_path, "")),
        Some(sel) => {
            label_selector(sel, &sel_path, out);
            if selector_is_empty(sel) {
                let msg = format!("empty selector is invalid for {kind}");
                out.push(Cause::invalid(&sel_path, sel, &msg));
            }
        }
    }
    let tpath = path.child("template");
    let labels_path = tpath.child("metadata").child("labels");
    let template_labels = at(spec, &["template", "metadata", "labels"]);
    labels(template_labels, &labels_path, out);
    if let Some(sel) = selector.filter(|s| !selector_is_empty(s)) {
        // A selector that does not convert (say `In` without values) selects nothing.
        let set = template_labels.and_then(Value::as_object);
        if !LabelSelector::from_json(sel).is_ok_and(|s| s.matches(set)) {
            let shown = template_labels.cloned().unwrap_or(json!({}));
            let msg = "`selector` does not match template `labels`";
            out.push(Cause::invalid(&labels_path, &shown, msg));
        }
    }
    let empty = json!({});
    let pod = at(spec, &["template", "spec"]).unwrap_or(&empty);
    let pod_path = tpath.child("spec");
    pod_spec(pod, &pod_path, out);
    super::ephemeral::in_template(pod, &pod_path, out);
    if !str_at(pod, "restartPolicy").is_empty() {
        one_of(pod, "restartPolicy", &["Always"], true, &pod_path, out);
    }
    if pod
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        let owner = match kind {
            "daemonset" => "DaemonSet",
            "statefulset" => "StatefulSet",
            _ => "ReplicaSet",
        };
        let msg = format!("activeDeadlineSeconds in {owner} is not Supported");
        out.push(Cause::forbidden(
            pod_path.child("activeDeadlineSeconds"),
            &msg,
        ));
    }
}

fn strategy(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let Some(strategy) = spec.get("strategy").filter(|s| !s.is_null()) else {
        return;
    };
    one_of(
        strategy,
        "type",
        &["Recreate", "RollingUpdate"],
        true,
        path,
        out,
    );
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match (str_at(strategy, "type"), rolling) {
        ("Recreate", Some(_)) => out.push(Cause::forbidden(
            path.child("rollingUpdate"),
            "may not be specified when strategy `type` is 'Recreate'",
        )),
        ("RollingUpdate", Some(r)) => rolling_update(r, &path.child("rollingUpdate"), out),
        _ => {}
    }
}

/// The value of an int-or-percent field (percent as-is); None when malformed.
pub(super) fn int_or_percent(v: &Value, path: &Path, out: &mut Vec<Cause>) -> Option<i64> {
    let n = match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.strip_suffix('%').and_then(|n| n.parse::<i64>().ok()),
        _ => None,
    };
    match n {
        None => out.push(Cause::invalid(path, v, PERCENT_MSG)),
        Some(n) if n < 0 => out.push(Cause::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        )),
        Some(_) => {}
    }
    n
}

fn rolling_update(r: &Value, path: &Path, out: &mut Vec<Cause>) {
    let field = |key: &str, out: &mut Vec<Cause>| {
        r.get(key)
            .filter(|v| !v.is_null())
            .and_then(|v| int_or_percent(v, &path.child(key), out))
    };
    let unavailable = field("maxUnavailable", out);
    let surge = field("maxSurge", out);
    if unavailable == Some(0) && surge == Some(0) {
        let v = r.get("maxUnavailable").unwrap_or(&Value::Null);
        let msg = "may not be 0 when `maxSurge` is 0";
        out.push(Cause::invalid(path.child("maxUnavailable"), v, msg));
    }
    if let Some(Value::String(s)) = r.get("maxUnavailable") {
        if unavailable.is_some_and(|n| n > 100) {
            let msg = "must not be greater than 100%";
            out.push(Cause::invalid(path.child("maxUnavailable"), &json!(s), msg));
        }
    }
}
