//! Job and CronJob rows, as kubectl 1.32 prints them (printJob, printCronJob).

use super::age::{human_age, human_duration};
use super::{age, age_col, col, name, name_col, template_cells, template_columns, Column};
use crate::json::{at, int_at, items, str_at};
use chrono::{DateTime, Utc};
use keelson_apimachinery::LabelSelector;
use serde_json::{json, Value};

fn wide_columns(selector_doc: &'static str) -> [Column; 3] {
    let [containers, images] = template_columns();
    [
        containers,
        images,
        col("Selector", "string", 1, selector_doc),
    ]
}

pub(super) fn job_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col("Status", "string", 0, "Status of the job."),
        col("Completions", "string", 0, "The desired number of successfully finished pods the job should be run with. Setting to null means that the success of any pod signals the success of all pods, and allows parallelism to have any positive value. Setting to 1 means that parallelism is limited to 1 and the success of that pod signals the success of the job. More info: https://kubernetes.io/docs/concepts/workloads/controllers/jobs-run-to-completion/"),
        col("Duration", "string", 0, "Time required to complete the job."),
        age_col(),
    ];
    cols.extend(wide_columns("A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"));
    cols
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    let status = obj.get("status").cloned().unwrap_or(json!({}));
    items(&status, "conditions")
        .iter()
        .any(|c| str_at(c, "type") == type_ && str_at(c, "status") == "True")
}

/// upstream's order: a terminal condition first, then Terminating, Suspended, the interim ones.
fn job_status(obj: &Value) -> &'static str {
    let deleting = at(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null());
    if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

fn completions(obj: &Value) -> String {
    let succeeded = at(obj, &["status"])
        .and_then(|s| int_at(s, "succeeded"))
        .unwrap_or(0);
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    match (int_at(&spec, "completions"), int_at(&spec, "parallelism")) {
        (Some(c), _) => format!("{succeeded}/{c}"),
        (None, Some(p)) if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    }
}

fn seconds(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn duration(obj: &Value, now: DateTime<Utc>) -> String {
    let status = obj.get("status").cloned().unwrap_or(json!({}));
    let Some(start) = seconds(str_at(&status, "startTime")) else {
        return String::new();
    };
    let end = seconds(str_at(&status, "completionTime")).unwrap_or(now);
    human_duration((end - start).num_seconds())
}

/// Containers, Images and Selector, from a pod template under `spec_path`.
fn wide_cells(obj: &Value, template: &[&str], selector: &[&str]) -> [Value; 3] {
    let [names, images] = template_cells(obj, template);
    let sel = at(obj, selector)
        .and_then(|s| LabelSelector::from_json(s).ok())
        .map(|s| s.to_string())
        .unwrap_or_else(|| "<none>".into());
    [names, images, json!(sel)]
}

pub(super) fn job_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut cells = vec![
        name(obj),
        json!(job_status(obj)),
        json!(completions(obj)),
        json!(duration(obj, now)),
        age(obj, now),
    ];
    cells.extend(wide_cells(
        obj,
        &["spec", "template", "spec"],
        &["spec", "selector"],
    ));
    cells
}

pub(super) fn cron_job_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col("Schedule", "string", 0, "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        col("Timezone", "string", 0, "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"),
        col("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."),
        col("Active", "integer", 0, "A list of pointers to currently running jobs."),
        col("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
        age_col(),
    ];
    cols.extend(wide_columns("A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"));
    cols
}

pub(super) fn cron_job_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let status = obj.get("status").unwrap_or(&empty);
    let tz = match str_at(spec, "timeZone") {
        "" => "<none>",
        tz => tz,
    };
    let last = match str_at(status, "lastScheduleTime") {
        "" => "<none>".to_string(),
        t => human_age(t, now),
    };
    let suspend = spec
        .get("suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut cells = vec![
        name(obj),
        json!(str_at(spec, "schedule")),
        json!(tz),
        json!(suspend),
        json!(items(status, "active").len()),
        json!(last),
        age(obj, now),
    ];
    cells.extend(wide_cells(
        obj,
        &["spec", "jobTemplate", "spec", "template", "spec"],
        &["spec", "jobTemplate", "spec", "selector"],
    ));
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        seconds("2026-01-01T01:00:00Z").unwrap()
    }

    #[test]
    fn jobs_print_status_completions_and_duration() {
        let job = json!({
            "metadata": { "name": "pi", "creationTimestamp": "2026-01-01T00:00:00Z" },
            "spec": { "completions": 5, "parallelism": 2, "selector": { "matchLabels": { "a": "b" } },
                "template": { "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } },
            "status": { "succeeded": 5, "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:42Z",
                "conditions": [{ "type": "SuccessCriteriaMet", "status": "True" }, { "type": "Complete", "status": "True" }] },
        });
        let cells = job_cells(&job, now());
        assert_eq!(cells.len(), job_columns().len());
        assert_eq!(
            &cells[..5],
            &[
                json!("pi"),
                json!("Complete"),
                json!("5/5"),
                json!("42s"),
                json!("60m")
            ]
        );
        assert_eq!(cells[7], json!("a=b"));
        let queue =
            json!({ "metadata": { "name": "q" }, "spec": { "parallelism": 3 }, "status": {} });
        let cells = job_cells(&queue, now());
        assert_eq!(
            &cells[1..4],
            &[json!("Running"), json!("0/1 of 3"), json!("")]
        );
    }

    #[test]
    fn cronjobs_print_schedule_zone_suspend_active_and_last_schedule() {
        let cj = json!({
            "metadata": { "name": "tick", "creationTimestamp": "2026-01-01T00:00:00Z" },
            "spec": { "schedule": "*/5 * * * *", "suspend": false,
                "jobTemplate": { "spec": { "template": { "spec": { "containers": [{ "name": "c", "image": "i" }] } } } } },
            "status": { "active": [{ "name": "tick-1" }], "lastScheduleTime": "2026-01-01T00:55:00Z" },
        });
        let cells = cron_job_cells(&cj, now());
        assert_eq!(cells.len(), cron_job_columns().len());
        assert_eq!(
            &cells[..7],
            &[
                json!("tick"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!(false),
                json!(1),
                json!("5m"),
                json!("60m")
            ]
        );
    }
}
