//! What a CronJob needs now, given the Jobs it owns and the time (upstream's cronjob
//! controller v2): the Job of the most recent scheduled time not yet run (only that one, however
//! many were missed), concurrencyPolicy, startingDeadlineSeconds, suspend, the history limits,
//! and status.active/lastScheduleTime/lastSuccessfulTime. Pure: the clock is an input.

use crate::pods::owner_ref;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use keelson_apimachinery::cron::{CronError, Schedule};
use keelson_apimachinery::well_known::CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION;
use kube::ResourceExt;
use std::time::Duration;

/// Past this many missed start times, a Warning (upstream's number).
const MISSED_WARNING: usize = 100;
/// Counting missed times stops here; the Warning then says at least this many.
const MISSED_COUNT_CAP: usize = 10_000;

#[derive(Debug, Default)]
pub struct Plan {
    /// The Job to create now.
    pub create: Option<Job>,
    /// Jobs to delete (Replace, history limits), by name.
    pub delete: Vec<String>,
    /// The status to write (the created Job is added to `active` once it exists).
    pub status: CronJobStatus,
    /// Events on the CronJob: (warning?, reason, message).
    pub events: Vec<(bool, String, String)>,
    /// When the next scheduled time comes.
    pub requeue: Option<Duration>,
}

/// "Complete" or "Failed" when the Job has finished.
pub fn finished(job: &Job) -> Option<&str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

pub fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The Job's name for `scheduled`: `<cronjob>-<minutes since the epoch>`, as upstream.
pub fn job_name(cj: &CronJob, scheduled: Timestamp) -> String {
    format!("{}-{}", cj.name_any(), scheduled.as_second().div_euclid(60))
}

/// Decides for `cj` given the Jobs it controls, at `now`.
pub fn plan(cj: &CronJob, jobs: &[Job], now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let old = cj.status.clone().unwrap_or_default();
    plan.status = old.clone();
    let was_active = |j: &Job| {
        old.active
            .iter()
            .flatten()
            .any(|r| r.uid.is_some() && r.uid == j.metadata.uid)
    };
    let mut active: Vec<&Job> = Vec::new();
    for job in jobs {
        match finished(job) {
            None if job.metadata.deletion_timestamp.is_none() => active.push(job),
            None => {}
            Some(condition) => {
                if was_active(job) {
                    let msg = format!(
                        "Saw completed job: {}, condition: {condition}",
                        job.name_any()
                    );
                    plan.events.push((false, "SawCompletedJob".into(), msg));
                }
                if condition == "Complete" {
                    let done = job.status.as_ref().and_then(|s| s.completion_time.clone());
                    let last = &mut plan.status.last_successful_time;
                    if done.as_ref().map(|t| t.0) > last.as_ref().map(|t| t.0) {
                        *last = done;
                    }
                }
            }
        }
    }
    history(cj, jobs, &mut plan);
    schedule(cj, jobs, &mut active, now, &mut plan);
    let refs: Vec<ObjectReference> = active
        .iter()
        .filter(|j| !plan.delete.contains(&j.name_any()))
        .map(|j| job_ref(j))
        .collect();
    // Always a list, [] when none: a merge patch leaves out what is absent.
    plan.status.active = Some(refs);
    plan
}

/// The finished Jobs past successfulJobsHistoryLimit and failedJobsHistoryLimit, oldest first.
fn history(cj: &CronJob, jobs: &[Job], plan: &mut Plan) {
    let spec = &cj.spec;
    let limits = [
        ("Complete", spec.successful_jobs_history_limit),
        ("Failed", spec.failed_jobs_history_limit),
    ];
    for (condition, limit) in limits {
        let Some(limit) = limit else { continue };
        let mut done: Vec<&Job> = jobs
            .iter()
            .filter(|j| finished(j) == Some(condition) && j.metadata.deletion_timestamp.is_none())
            .collect();
        done.sort_by_key(|j| {
            let start = j.status.as_ref().and_then(|s| s.start_time.as_ref());
            start
                .or(j.metadata.creation_timestamp.as_ref())
                .map(|t| t.0)
        });
        let extra = done
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        for job in done.iter().take(extra) {
            plan.delete.push(job.name_any());
            let msg = format!("Deleted job {}", job.name_any());
            plan.events.push((false, "SuccessfulDelete".into(), msg));
        }
    }
}

/// The scheduled time to run now, if any, and what concurrencyPolicy says about it.
fn schedule(cj: &CronJob, jobs: &[Job], active: &mut Vec<&Job>, now: Timestamp, plan: &mut Plan) {
    let spec = &cj.spec;
    let sched = match Schedule::parse(&spec.schedule, spec.time_zone.as_deref()) {
        Ok(s) => s,
        Err(CronError::TimeZone(e)) => {
            let tz = spec.time_zone.clone().unwrap_or_default();
            let msg = format!("invalid timeZone: {tz:?}: {e}");
            plan.events.push((true, "UnknownTimeZone".into(), msg));
            return;
        }
        Err(CronError::Schedule(e)) => {
            let msg = format!("unparseable schedule: {:?} : {e}", spec.schedule);
            plan.events.push((true, "UnparseableSchedule".into(), msg));
            return;
        }
    };
    plan.requeue = sched.next_after(now).map(|t| {
        Duration::try_from(now.duration_until(t)).unwrap_or_default() + Duration::from_millis(100)
    });
    if spec.suspend == Some(true) {
        return;
    }
    let Some(scheduled) = due(cj, &sched, now, plan) else {
        return;
    };
    if let Some(deadline) = spec.starting_deadline_seconds {
        let late = scheduled
            .checked_add(SignedDuration::from_secs(deadline))
            .is_ok_and(|t| t < now);
        if late {
            let msg = format!(
                "Missed scheduled time to start a job: {}",
                scheduled.strftime("%a, %d %b %Y %H:%M:%S %z")
            );
            plan.events.push((true, "MissSchedule".into(), msg));
            return;
        }
    }
    let name = job_name(cj, scheduled);
    if jobs.iter().any(|j| j.name_any() == name) {
        return;
    }
    match spec.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            let msg = "Not starting job because prior execution is running and concurrency policy is Forbid";
            plan.events
                .push((false, "JobAlreadyActive".into(), msg.into()));
            return;
        }
        Some("Replace") => {
            for job in active.drain(..) {
                plan.delete.push(job.name_any());
                let msg = format!("Deleted job {}", job.name_any());
                plan.events.push((false, "SuccessfulDelete".into(), msg));
            }
        }
        _ => {}
    }
    plan.create = Some(new_job(cj, &sched, &name, scheduled));
    plan.status.last_schedule_time = Some(Time(scheduled));
}

/// The most recent scheduled time after the last one run (or the CronJob's creation), and
/// within startingDeadlineSeconds; a Warning when more than 100 were missed.
fn due(cj: &CronJob, sched: &Schedule, now: Timestamp, plan: &mut Plan) -> Option<Timestamp> {
    let status = cj.status.as_ref();
    let last = status.and_then(|s| s.last_schedule_time.as_ref());
    let mut earliest = last
        .or(cj.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0);
    if let Some(deadline) = cj.spec.starting_deadline_seconds {
        if let Ok(floor) = now.checked_sub(SignedDuration::from_secs(deadline)) {
            earliest = earliest.max(floor);
        }
    }
    let recent = sched.last_at_or_before(now).filter(|t| *t > earliest)?;
    let mut missed = 0;
    let mut t = earliest;
    while let Some(next) = sched.next_after(t).filter(|n| *n <= now) {
        missed += 1;
        t = next;
        if missed >= MISSED_COUNT_CAP {
            break;
        }
    }
    if missed > MISSED_WARNING {
        let msg = format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew");
        plan.events.push((true, "TooManyMissedTimes".into(), msg));
    }
    Some(recent)
}

/// The Job for `scheduled`, from the jobTemplate, owned by the CronJob.
fn new_job(cj: &CronJob, sched: &Schedule, name: &str, scheduled: Timestamp) -> Job {
    let template = cj.spec.job_template.clone();
    let mut meta = template.metadata.unwrap_or_default();
    meta.name = Some(name.into());
    meta.namespace = cj.namespace();
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(
            CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION.into(),
            sched.rfc3339_in_zone(scheduled),
        );
    meta.owner_references = Some(vec![owner_ref(
        "batch/v1",
        "CronJob",
        &cj.name_any(),
        &cj.uid().unwrap_or_default(),
    )]);
    Job {
        metadata: meta,
        spec: template.spec,
        status: None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
