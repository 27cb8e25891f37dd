//! Job and CronJob rules (batch/validation), with upstream's field paths and messages.

use super::field_checks::{immutable, label_selector, labels, non_negative, one_of};
use super::pod::pod_spec;
use crate::cause::Cause;
use crate::json::{at, items, str_at};
use crate::path::Path;
use keelson_apimachinery::cron::{CronError, Schedule};
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

/// A CronJob's name plus the 11 characters of `-<minutes>` must make a valid Job name.
const CRONJOB_NAME_MAX: usize = 52;

pub(crate) fn job(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => out.push(Cause::required(path.child("selector"), "")),
        Some(sel) => selector_matches_template(spec, sel, &path, out),
    }
    job_spec(spec, &path, out);
    if let Some(old_spec) = old.and_then(|o| o.get("spec")) {
        for key in ["selector", "completionMode", "template"] {
            let new = spec.get(key).unwrap_or(&Value::Null);
            let was = old_spec.get(key).unwrap_or(&Value::Null);
            immutable(new, was, &path.child(key), out);
        }
    }
}

fn selector_matches_template(spec: &Value, sel: &Value, path: &Path, out: &mut Vec<Cause>) {
    label_selector(sel, &path.child("selector"), out);
    let template_labels = at(spec, &["template", "metadata", "labels"]);
    let set = template_labels.and_then(Value::as_object);
    if !LabelSelector::from_json(sel).is_ok_and(|s| s.matches(set)) {
        let shown = template_labels.cloned().unwrap_or(json!({}));
        let labels_path = path.child("template").child("metadata").child("labels");
        let msg = "`selector` does not match template `labels`";
        out.push(Cause::invalid(labels_path, &shown, msg));
    }
}

/// What a Job's spec and a CronJob's jobTemplate.spec share.
fn job_spec(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(spec, key, path, out);
    }
    one_of(
        spec,
        "completionMode",
        &["NonIndexed", "Indexed"],
        false,
        path,
        out,
    );
    let indexed = str_at(spec, "completionMode") == "Indexed";
    if indexed && spec.get("completions").is_none_or(Value::is_null) {
        out.push(Cause::required(
            path.child("completions"),
            "when completion mode is Indexed",
        ));
    }
    let tpath = path.child("template");
    labels(
        at(spec, &["template", "metadata", "labels"]),
        &tpath.child("metadata").child("labels"),
        out,
    );
    let empty = json!({});
    let pod = at(spec, &["template", "spec"]).unwrap_or(&empty);
    let pod_path = tpath.child("spec");
    pod_spec(pod, &pod_path, out);
    super::ephemeral::in_template(pod, &pod_path, out);
    let restart = str_at(pod, "restartPolicy");
    if restart.is_empty() {
        out.push(Cause::required(
            pod_path.child("restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    } else {
        one_of(
            pod,
            "restartPolicy",
            &["OnFailure", "Never"],
            true,
            &pod_path,
            out,
        );
    }
    if let Some(policy) = spec.get("podFailurePolicy").filter(|p| !p.is_null()) {
        if restart != "Never" && !restart.is_empty() {
            let msg = "only \"Never\" is supported when podFailurePolicy is specified";
            out.push(Cause::invalid(
                pod_path.child("restartPolicy"),
                &json!(restart),
                msg,
            ));
        }
        pod_failure_policy(policy, &path.child("podFailurePolicy"), out);
    }
}

fn pod_failure_policy(policy: &Value, path: &Path, out: &mut Vec<Cause>) {
    let rules = path.child("rules");
    for (i, rule) in items(policy, "rules").iter().enumerate() {
        let p = rules.index(i);
        one_of(
            rule,
            "action",
            &["Count", "FailIndex", "FailJob", "Ignore"],
            true,
            &p,
            out,
        );
        let codes = rule.get("onExitCodes").filter(|c| !c.is_null());
        let conditions = !items(rule, "onPodConditions").is_empty();
        if codes.is_some() == conditions {
            let msg = "specifying one of OnExitCodes and OnPodConditions is required";
            out.push(Cause::invalid(&p, rule, msg));
        }
        if let Some(codes) = codes {
            let cp = p.child("onExitCodes");
            one_of(codes, "operator", &["In", "NotIn"], true, &cp, out);
            let values = items(codes, "values");
            if values.is_empty() {
                out.push(Cause::invalid(
                    cp.child("values"),
                    &json!([]),
                    "at least one value is required",
                ));
            }
            if str_at(codes, "operator") == "In" && values.iter().any(|v| v.as_i64() == Some(0)) {
                let msg = "must not be 0 for the In operator";
                out.push(Cause::invalid(cp.child("values"), &json!(0), msg));
            }
        }
    }
}

pub(crate) fn cron_job(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let name = str_at(obj.get("metadata").unwrap_or(&Value::Null), "name");
    if name.len() > CRONJOB_NAME_MAX {
        let msg = format!("must be no more than {CRONJOB_NAME_MAX} characters");
        out.push(Cause::invalid(
            Path::root().child("metadata").child("name"),
            &json!(name),
            &msg,
        ));
    }
    let path = Path::root().child("spec");
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    schedule(spec, &path, out);
    one_of(
        spec,
        "concurrencyPolicy",
        &["Allow", "Forbid", "Replace"],
        true,
        &path,
        out,
    );
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        non_negative(spec, key, &path, out);
    }
    let jpath = path.child("jobTemplate").child("spec");
    let job_template = at(spec, &["jobTemplate", "spec"]).unwrap_or(&empty);
    if let Some(sel) = job_template.get("selector").filter(|s| !s.is_null()) {
        selector_matches_template(job_template, sel, &jpath, out);
    }
    job_spec(job_template, &jpath, out);
    let _ = old;
}

fn schedule(spec: &Value, path: &Path, out: &mut Vec<Cause>) {
    let text = str_at(spec, "schedule");
    if text.is_empty() {
        out.push(Cause::required(path.child("schedule"), ""));
        return;
    }
    let tz = spec.get("timeZone").and_then(Value::as_str);
    match Schedule::parse(text, tz) {
        Ok(_) => {}
        Err(CronError::Schedule(msg)) => {
            out.push(Cause::invalid(path.child("schedule"), &json!(text), &msg));
        }
        Err(CronError::TimeZone(msg)) => {
            out.push(Cause::invalid(path.child("timeZone"), &json!(tz), &msg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(out: &[Cause]) -> String {
        format!("{out:?}")
    }

    fn job_obj(extra: Value) -> Value {
        let mut spec = json!({
            "selector": { "matchLabels": { "batch.kubernetes.io/controller-uid": "u" } },
            "completionMode": "NonIndexed",
            "template": { "metadata": { "labels": { "batch.kubernetes.io/controller-uid": "u" } },
                "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } },
        });
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let mut obj = json!({ "metadata": { "name": "pi" }, "spec": spec });
        crate::apply_defaults("Job", &mut obj);
        obj
    }

    #[test]
    fn a_valid_job_passes() {
        let mut out = Vec::new();
        job(
            &job_obj(json!({ "completions": 5, "parallelism": 2 })),
            None,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn jobs_say_what_is_wrong() {
        let mut out = Vec::new();
        let mut obj =
            job_obj(json!({ "completionMode": "Indexed", "parallelism": 2, "backoffLimit": -1 }));
        obj["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        job(&obj, None, &mut out);
        let text = messages(&out);
        assert!(text.contains("spec.completions"), "{text}");
        assert!(text.contains("spec.backoffLimit"), "{text}");
        assert!(text.contains("spec.template.spec.restartPolicy"), "{text}");
        let mut out = Vec::new();
        let new = job_obj(json!({ "completionMode": "Indexed", "completions": 2 }));
        job(&new, Some(&job_obj(json!({}))), &mut out);
        assert!(messages(&out).contains("field is immutable"), "{out:?}");
    }

    #[test]
    fn cronjobs_check_schedule_time_zone_and_policy() {
        let cj = |schedule: &str, tz: Option<&str>| {
            let mut obj = json!({ "metadata": { "name": "tick" }, "spec": { "schedule": schedule, "timeZone": tz,
                "concurrencyPolicy": "Allow",
                "jobTemplate": { "spec": { "template": { "spec": { "restartPolicy": "OnFailure",
                    "containers": [{ "name": "c", "image": "i" }] } } } } } });
            crate::apply_defaults("CronJob", &mut obj);
            obj
        };
        let mut out = Vec::new();
        cron_job(&cj("*/5 * * * *", Some("Europe/Paris")), None, &mut out);
        assert!(out.is_empty(), "{out:?}");
        cron_job(&cj("* * *", None), None, &mut out);
        assert!(
            messages(&out).contains("expected exactly 5 fields"),
            "{out:?}"
        );
        let mut out = Vec::new();
        cron_job(&cj("@hourly", Some("Nowhere/City")), None, &mut out);
        assert!(
            messages(&out).contains("unknown time zone Nowhere/City"),
            "{out:?}"
        );
        let mut long = cj("@daily", None);
        long["metadata"]["name"] = json!("x".repeat(53));
        let mut out = Vec::new();
        cron_job(&long, None, &mut out);
        assert!(messages(&out).contains("no more than 52"), "{out:?}");
    }
}
