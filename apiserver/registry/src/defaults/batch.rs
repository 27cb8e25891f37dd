//! Job and CronJob defaults (batch/v1 SetDefaults_Job, SetDefaults_CronJob, and the Job
//! strategy's generated selector).

use super::pod::pod_template;
use crate::json::{default, object_mut, str_at};
use keelson_apimachinery::well_known::{
    JOB_CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_JOB_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
};
use serde_json::{json, Map, Value};

pub(crate) fn job(obj: &mut Map<String, Value>) {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let (uid, name) = (str_at(&meta, "uid"), str_at(&meta, "name"));
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    job_spec(spec);
    generate_selector(spec, uid, name);
}

/// What SetDefaults_Job fills in a Job's spec (also a CronJob's jobTemplate's, where upstream
/// defaults it when the Job is made).
fn job_spec(spec: &mut Map<String, Value>) {
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    let per_index = !unset(spec, "backoffLimitPerIndex");
    default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    default(spec, "manualSelector", json!(false));
    pod_template(spec);
}

/// Unless manualSelector: the selector is the Job's uid, and its pods carry the uid and name
/// labels, both the batch.kubernetes.io ones and the legacy ones (upstream's generateSelector).
fn generate_selector(spec: &mut Map<String, Value>, uid: &str, name: &str) {
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let has_selector = spec.get("selector").is_some_and(|s| !s.is_null());
    if manual || uid.is_empty() || has_selector {
        return;
    }
    spec.insert(
        "selector".into(),
        json!({ "matchLabels": { JOB_CONTROLLER_UID_LABEL: uid } }),
    );
    let Some(template) = object_mut(spec, "template") else {
        return;
    };
    let Some(meta) = object_mut(template, "metadata") else {
        return;
    };
    let Some(labels) = object_mut(meta, "labels") else {
        return;
    };
    for (k, v) in [
        (JOB_CONTROLLER_UID_LABEL, uid),
        (LEGACY_JOB_CONTROLLER_UID_LABEL, uid),
        (JOB_NAME_LABEL, name),
        (LEGACY_JOB_NAME_LABEL, name),
    ] {
        default(labels, k, json!(v));
    }
}

pub(crate) fn cron_job(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job) = spec
        .get_mut("jobTemplate")
        .and_then(Value::as_object_mut)
        .and_then(|t| object_mut(t, "spec"))
    {
        pod_template(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_upstreams_defaults_and_a_selector_of_its_uid() {
        let mut obj = json!({
            "metadata": { "name": "pi", "uid": "u1" },
            "spec": { "template": { "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } },
        });
        job(obj.as_object_mut().unwrap());
        let spec = &obj["spec"];
        assert_eq!(
            (spec["completions"].as_i64(), spec["parallelism"].as_i64()),
            (Some(1), Some(1))
        );
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(
            spec["selector"],
            json!({ "matchLabels": { JOB_CONTROLLER_UID_LABEL: "u1" } })
        );
        let labels = &spec["template"]["metadata"]["labels"];
        assert_eq!(labels[JOB_NAME_LABEL], "pi");
        assert_eq!(labels[LEGACY_JOB_CONTROLLER_UID_LABEL], "u1");
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset() {
        let mut obj = json!({ "metadata": { "name": "q", "uid": "u" }, "spec": { "parallelism": 3, "template": {} } });
        job(obj.as_object_mut().unwrap());
        assert!(obj["spec"].get("completions").is_none());
    }

    #[test]
    fn a_cronjob_keeps_three_successful_and_one_failed() {
        let mut obj = json!({ "spec": { "schedule": "* * * * *", "jobTemplate": { "spec": { "template": { "spec": {} } } } } });
        cron_job(obj.as_object_mut().unwrap());
        let spec = &obj["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(
            (
                spec["successfulJobsHistoryLimit"].as_i64(),
                spec["failedJobsHistoryLimit"].as_i64()
            ),
            (Some(3), Some(1))
        );
    }
}
