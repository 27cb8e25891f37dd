//! The CronJob planner with a fake clock.

use super::*;
use serde_json::json;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn cronjob(spec: serde_json::Value, status: serde_json::Value) -> CronJob {
    let mut full = json!({
        "schedule": "* * * * *", "timeZone": "UTC", "concurrencyPolicy": "Allow",
        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1, "suspend": false,
        "jobTemplate": { "metadata": { "labels": { "app": "tick" } },
            "spec": { "template": { "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } } },
    });
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": { "name": "tick", "namespace": "default", "uid": "cj1",
            "creationTimestamp": "2026-01-01T00:00:30Z" },
        "spec": full, "status": status,
    }))
    .unwrap()
}

/// A Job of the CronJob, created at `minute` (HH:MM), finished with `condition` if any.
fn job(minute: &str, condition: Option<&str>) -> Job {
    let at = format!("2026-01-01T{minute}:00Z");
    let secs = t(&at).as_second() / 60;
    let conditions = condition.map_or(json!([]), |c| json!([{ "type": c, "status": "True" }]));
    serde_json::from_value(json!({
        "metadata": { "name": format!("tick-{secs}"), "namespace": "default", "uid": format!("j-{minute}"),
            "creationTimestamp": at },
        "status": { "startTime": at, "completionTime": if condition == Some("Complete") { json!(at) } else { json!(null) },
            "conditions": conditions },
    }))
    .unwrap()
}

#[test]
fn every_minute_one_job_named_by_its_minute() {
    let cj = cronjob(json!({}), json!({}));
    // Created at 00:00:30: nothing due until 00:01.
    let p = plan(&cj, &[], t("2026-01-01T00:00:45Z"));
    assert!(p.create.is_none());
    assert_eq!(p.requeue, Some(Duration::from_millis(15_100)));
    let p = plan(&cj, &[], t("2026-01-01T00:01:02Z"));
    let job = p.create.unwrap();
    let minute = t("2026-01-01T00:01:00Z").as_second() / 60;
    assert_eq!(job.name_any(), format!("tick-{minute}"));
    assert_eq!(job.labels()["app"], "tick");
    assert_eq!(
        job.annotations()[CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION],
        "2026-01-01T00:01:00+00:00"
    );
    assert_eq!(job.owner_references()[0].kind, "CronJob");
    assert_eq!(
        p.status.last_schedule_time,
        Some(Time(t("2026-01-01T00:01:00Z")))
    );
}

#[test]
fn only_the_most_recent_missed_run_starts_and_over_100_warns() {
    let cj = cronjob(
        json!({}),
        json!({ "lastScheduleTime": "2026-01-01T00:01:00Z" }),
    );
    // Three hours later: 180 missed, one Job for 03:01, and a Warning.
    let p = plan(&cj, &[], t("2026-01-01T03:01:20Z"));
    let minute = t("2026-01-01T03:01:00Z").as_second() / 60;
    assert_eq!(p.create.unwrap().name_any(), format!("tick-{minute}"));
    let warning = p
        .events
        .iter()
        .find(|e| e.1 == "TooManyMissedTimes")
        .unwrap();
    assert!(
        warning.2.starts_with("too many missed start times: 180."),
        "{}",
        warning.2
    );
    // With a starting deadline of 200 s only the last few count: no Warning.
    let cj = cronjob(
        json!({ "startingDeadlineSeconds": 200 }),
        json!({ "lastScheduleTime": "2026-01-01T00:01:00Z" }),
    );
    let p = plan(&cj, &[], t("2026-01-01T03:01:20Z"));
    assert!(p.create.is_some());
    assert!(p.events.is_empty(), "{:?}", p.events);
}

#[test]
fn forbid_waits_and_replace_deletes_the_running_job() {
    let status = json!({ "lastScheduleTime": "2026-01-01T00:01:00Z", "active": [{ "name": "x", "uid": "j-00:01" }] });
    let running = [job("00:01", None)];
    let now = t("2026-01-01T00:02:05Z");
    let forbid = cronjob(json!({ "concurrencyPolicy": "Forbid" }), status.clone());
    let p = plan(&forbid, &running, now);
    assert!(p.create.is_none());
    assert_eq!(p.events[0].1, "JobAlreadyActive");
    assert_eq!(p.status.active.as_ref().unwrap().len(), 1);
    let replace = cronjob(json!({ "concurrencyPolicy": "Replace" }), status.clone());
    let p = plan(&replace, &running, now);
    assert!(p.create.is_some());
    assert_eq!(p.delete, [running[0].name_any()]);
    assert_eq!(p.status.active, Some(vec![]));
    let allow = cronjob(json!({}), status);
    let p = plan(&allow, &running, now);
    assert!(p.create.is_some() && p.delete.is_empty());
}

#[test]
fn history_keeps_the_newest_within_the_limits() {
    let cj = cronjob(
        json!({ "successfulJobsHistoryLimit": 2 }),
        json!({ "lastScheduleTime": "2026-01-01T00:05:00Z",
        "active": [{ "name": "x", "uid": "j-00:05" }] }),
    );
    let jobs = [
        job("00:01", Some("Complete")),
        job("00:02", Some("Failed")),
        job("00:03", Some("Complete")),
        job("00:04", Some("Failed")),
        job("00:05", Some("Complete")),
    ];
    let p = plan(&cj, &jobs, t("2026-01-01T00:05:30Z"));
    assert_eq!(p.delete, [jobs[0].name_any(), jobs[1].name_any()]);
    assert_eq!(
        p.status.last_successful_time,
        Some(Time(t("2026-01-01T00:05:00Z")))
    );
    assert!(p.events.iter().any(|e| e.1 == "SawCompletedJob"));
    assert_eq!(p.status.active, Some(vec![]));
}

#[test]
fn suspend_and_bad_schedules_start_nothing() {
    let suspended = cronjob(json!({ "suspend": true }), json!({}));
    assert!(plan(&suspended, &[], t("2026-01-01T00:05:00Z"))
        .create
        .is_none());
    let bad = cronjob(json!({ "schedule": "every minute" }), json!({}));
    let p = plan(&bad, &[], t("2026-01-01T00:05:00Z"));
    assert!(p.create.is_none());
    assert_eq!(p.events[0].1, "UnparseableSchedule");
}

#[test]
fn time_zones_pick_the_wall_clock_minute() {
    let cj = cronjob(
        json!({ "schedule": "30 9 * * *", "timeZone": "Asia/Tokyo" }),
        json!({}),
    );
    // 09:30 in Tokyo is 00:30 UTC.
    let p = plan(&cj, &[], t("2026-01-02T00:30:10Z"));
    let job = p.create.unwrap();
    assert_eq!(
        job.annotations()[CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION],
        "2026-01-02T09:30:00+09:00"
    );
}
