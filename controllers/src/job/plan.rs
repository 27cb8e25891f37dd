//! What a Job needs now, given the pods it controls and the time: pods to create (with their
//! indexes), pods to delete, finished pods to count (through status.uncountedTerminatedPods
//! and the job-tracking finalizer, as upstream), and the status with upstream 1.32's
//! conditions. Pure: the clock is an input.

use super::pods::{finish_time, format_indexes, has_tracking_finalizer, index, is_terminating};
use super::pods::{outcome, parse_indexes};
use super::policy::{self, Action};
use crate::pods::is_ready;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use std::collections::BTreeSet;
use std::time::Duration;

/// Upstream's pod failure back-off: 10 s, doubled per failure since the last success, at most
/// 10 min.
const BACKOFF_BASE: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(600);

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Pods to create: the index of each for an Indexed Job, else None.
    pub create: Vec<Option<i32>>,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// Pods whose job-tracking finalizer goes, by name (after `recorded` is written).
    pub release: Vec<String>,
    /// The status holding the newly finished pods as uncounted: written before any finalizer
    /// goes, so that a crash in between loses no count. None when nothing new finished.
    pub recorded: Option<JobStatus>,
    /// The status to write at the end.
    pub status: JobStatus,
    /// Events on the Job: (warning?, reason, message).
    pub events: Vec<(bool, String, String)>,
    /// When to look again although nothing changes (back-off, deadline, TTL).
    pub requeue: Option<Duration>,
}

fn condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

pub fn find<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Complete or Failed: nothing more to do but release finalizers and wait for the TTL.
pub fn is_finished(status: &JobStatus) -> bool {
    find(status, "Complete").is_some() || find(status, "Failed").is_some()
}

/// The pods sorted out: finished ones newly seen, the uncounted ones now counted, the active.
#[derive(Default)]
struct Census<'a> {
    new_succeeded: Vec<&'a Pod>,
    new_failed: Vec<&'a Pod>,
    active: Vec<&'a Pod>,
    terminating: i32,
    fail_job: Option<String>,
}

fn census<'a>(job: &Job, pods: &'a [Pod], uncounted: &UncountedTerminatedPods) -> Census<'a> {
    let known = |uid: &str, list: &Option<Vec<String>>| list.iter().flatten().any(|u| u == uid);
    let mut c = Census::default();
    for pod in pods {
        let uid = pod.uid().unwrap_or_default();
        let recorded = known(&uid, &uncounted.succeeded) || known(&uid, &uncounted.failed);
        match outcome(pod, job) {
            None if is_terminating(pod) => c.terminating += 1,
            None => c.active.push(pod),
            Some(_) if recorded || !has_tracking_finalizer(pod) => {}
            Some(true) => c.new_succeeded.push(pod),
            Some(false) => match policy::action(job, pod) {
                Action::Ignore => {}
                Action::FailJob(msg) => {
                    c.fail_job.get_or_insert(msg);
                    c.new_failed.push(pod);
                }
                Action::Count => c.new_failed.push(pod),
            },
        }
    }
    c
}

fn uids(pods: &[&Pod]) -> Vec<String> {
    pods.iter().filter_map(|p| p.uid()).collect()
}

/// The back-off still to wait before a new pod, from the failures since the last success.
fn backoff_remaining(job: &Job, pods: &[Pod], now: Timestamp) -> Option<Duration> {
    let ended = |ok: bool| {
        pods.iter()
            .filter(move |p| outcome(p, job) == Some(ok))
            .filter_map(finish_time)
    };
    let last_success = ended(true).max();
    let failures: Vec<Timestamp> = ended(false)
        .filter(|t| last_success.is_none_or(|s| *t > s))
        .collect();
    let last = failures.iter().max()?;
    let n = u32::try_from(failures.len()).unwrap_or(u32::MAX).min(16);
    let delay = BACKOFF_BASE
        .saturating_mul(1 << n.saturating_sub(1))
        .min(BACKOFF_MAX);
    let due = last
        .checked_add(SignedDuration::try_from(delay).ok()?)
        .ok()?;
    let left = now.duration_until(due);
    (left > SignedDuration::ZERO).then(|| Duration::try_from(left).unwrap_or_default())
}

/// Decides for `job` given the pods it controls, at `now`.
pub fn plan(job: &Job, pods: &[Pod], now: Timestamp) -> Plan {
    let old = job.status.clone().unwrap_or_default();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let c = census(job, pods, &uncounted);
    let mut plan = Plan::default();
    // Everything recorded as uncounted (before, or now) is counted once its finalizer goes.
    let mut recorded = old.clone();
    let mut all_succeeded: Vec<String> = uncounted.succeeded.clone().unwrap_or_default();
    all_succeeded.extend(uids(&c.new_succeeded));
    let mut all_failed: Vec<String> = uncounted.failed.clone().unwrap_or_default();
    all_failed.extend(uids(&c.new_failed));
    if !c.new_succeeded.is_empty() || !c.new_failed.is_empty() {
        recorded.uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: Some(all_succeeded.clone()),
            failed: Some(all_failed.clone()),
        });
        plan.recorded = Some(recorded);
    }
    // Finished pods (and, once the Job is finished, all of them) let go of the finalizer.
    plan.release = pods
        .iter()
        .filter(|p| has_tracking_finalizer(p))
        .filter(|p| outcome(p, job).is_some() || is_finished(&old))
        .map(|p| p.name_any())
        .collect();
    let mut status = old.clone();
    // Explicit empty lists: a merge patch leaves out what is absent.
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: Some(Vec::new()),
        failed: Some(Vec::new()),
    });
    status.succeeded = Some(old.succeeded.unwrap_or(0) + all_succeeded.len() as i32);
    status.failed = Some(old.failed.unwrap_or(0) + all_failed.len() as i32);
    status.terminating = Some(c.terminating);
    if job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed") {
        let mut done = parse_indexes(old.completed_indexes.as_deref().unwrap_or(""));
        let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
        done.extend(
            pods.iter()
                .filter(|p| outcome(p, job) == Some(true))
                .filter_map(index)
                .filter(|i| *i < completions),
        );
        status.completed_indexes = Some(format_indexes(&done));
    }
    plan.status = status;
    if is_finished(&old) {
        plan.status.active = Some(0);
        plan.status.ready = Some(0);
        plan.delete = c.active.iter().map(|p| p.name_any()).collect();
        return plan;
    }
    decide(job, pods, &c, now, &mut plan);
    plan
}

/// Conditions, deadline, back-off, and the pods to create or delete.
fn decide(job: &Job, pods: &[Pod], c: &Census, now: Timestamp, plan: &mut Plan) {
    let spec = job.spec.clone().unwrap_or_default();
    if suspend(spec.suspend == Some(true), c, now, plan) {
        return;
    }
    let status = &mut plan.status;
    let start = status.start_time.get_or_insert(Time(now)).clone();
    let mut conditions = status.conditions.clone().unwrap_or_default();
    let deadline = spec
        .active_deadline_seconds
        .and_then(|s| start.0.checked_add(SignedDuration::from_secs(s)).ok());
    let failure = find(status, "FailureTarget").is_some();
    if !failure && find(status, "SuccessCriteriaMet").is_none() {
        let target = if let Some(msg) = &c.fail_job {
            Some(("PodFailurePolicy", msg.clone()))
        } else if status.failed.unwrap_or(0) > spec.backoff_limit.unwrap_or(6)
            || past_backoff_limit_on_failure(job, c)
        {
            Some((
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit".to_string(),
            ))
        } else if deadline.is_some_and(|d| d <= now) {
            Some((
                "DeadlineExceeded",
                "Job was active longer than specified deadline".to_string(),
            ))
        } else {
            None
        };
        if let Some((reason, msg)) = target {
            conditions.push(condition("FailureTarget", reason, &msg, now));
        }
    }
    if let Some(target) = find_in(&conditions, "FailureTarget").cloned() {
        fail(&target, c, now, &mut conditions, plan);
        plan.status.conditions = Some(conditions);
        return;
    }
    if let Some(d) = deadline {
        plan.requeue = Some(Duration::try_from(now.duration_until(d)).unwrap_or_default());
    }
    let (want, indexes) = wanted(job, pods, c, &plan.status);
    let succeeded = plan.status.succeeded.unwrap_or(0);
    let done = match (spec.completions, &indexes) {
        (Some(n), Some(_)) => {
            let done = parse_indexes(plan.status.completed_indexes.as_deref().unwrap_or(""));
            done.len() as i32 >= n && c.active.is_empty()
        }
        (Some(n), None) => succeeded >= n && c.active.is_empty(),
        (None, _) => succeeded > 0 && c.active.is_empty(),
    };
    if done || find_in(&conditions, "SuccessCriteriaMet").is_some() {
        complete(c, now, &mut conditions, plan);
        plan.status.conditions = Some(conditions);
        return;
    }
    plan.status.conditions = (!conditions.is_empty()).then_some(conditions);
    scale(job, pods, c, want, indexes, now, plan);
}

/// restartPolicy OnFailure: failed containers restart in place, so their restarts count toward
/// backoffLimit (upstream's pastBackoffLimitOnFailure).
fn past_backoff_limit_on_failure(job: &Job, c: &Census) -> bool {
    let spec = job.spec.as_ref();
    let pod_spec = spec.and_then(|s| s.template.spec.as_ref());
    if pod_spec.and_then(|p| p.restart_policy.as_deref()) != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = c
        .active
        .iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            let init = s.init_container_statuses.iter().flatten();
            init.chain(s.container_statuses.iter().flatten())
        })
        .map(|cs| cs.restart_count)
        .sum();
    match spec.and_then(|s| s.backoff_limit).unwrap_or(6) {
        0 => restarts > 0,
        limit => restarts >= limit,
    }
}

/// spec.suspend: the active pods go, the Suspended condition is True and startTime is cleared
/// (the deadline starts again on resume); on resume the condition turns False. True while
/// suspended.
fn suspend(suspended: bool, c: &Census, now: Timestamp, plan: &mut Plan) -> bool {
    let mut conditions = plan.status.conditions.clone().unwrap_or_default();
    let current = conditions.iter_mut().find(|c| c.type_ == "Suspended");
    let was = current.as_ref().is_some_and(|c| c.status == "True");
    let (status, reason, message, event) = match (suspended, was) {
        (true, false) => ("True", "JobSuspended", "Job suspended", "Suspended"),
        (false, true) => ("False", "JobResumed", "Job resumed", "Resumed"),
        (true, true) => ("True", "", "", ""),
        (false, false) => return false,
    };
    if !event.is_empty() {
        let mut cond = condition("Suspended", reason, message, now);
        cond.status = status.into();
        match current {
            Some(c) => *c = cond,
            None => conditions.push(cond),
        }
        plan.events.push((false, event.into(), message.into()));
        plan.status.conditions = Some(conditions);
    }
    if !suspended {
        return false;
    }
    plan.status.start_time = None;
    plan.delete = c.active.iter().map(|p| p.name_any()).collect();
    plan.status.active = Some(0);
    plan.status.ready = Some(0);
    true
}

fn find_in<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// FailureTarget is set: the active pods go, and once none is left running or terminating
/// the Job is Failed with the same reason.
fn fail(
    target: &JobCondition,
    c: &Census,
    now: Timestamp,
    conds: &mut Vec<JobCondition>,
    plan: &mut Plan,
) {
    plan.delete = c.active.iter().map(|p| p.name_any()).collect();
    plan.status.active = Some(0);
    plan.status.ready = Some(0);
    if c.active.is_empty() && c.terminating == 0 {
        let reason = target.reason.clone().unwrap_or_default();
        let message = target.message.clone().unwrap_or_default();
        conds.push(condition("Failed", &reason, &message, now));
        plan.events.push((true, reason, message));
    }
}

/// Enough pods succeeded: SuccessCriteriaMet, then Complete once no pod is terminating.
fn complete(c: &Census, now: Timestamp, conds: &mut Vec<JobCondition>, plan: &mut Plan) {
    const REASON: &str = "CompletionsReached";
    const MESSAGE: &str = "Reached expected number of succeeded pods";
    if find_in(conds, "SuccessCriteriaMet").is_none() {
        conds.push(condition("SuccessCriteriaMet", REASON, MESSAGE, now));
    }
    plan.delete = c.active.iter().map(|p| p.name_any()).collect();
    plan.status.active = Some(0);
    plan.status.ready = Some(0);
    if c.active.is_empty() && c.terminating == 0 {
        conds.push(condition("Complete", REASON, MESSAGE, now));
        plan.status.completion_time = Some(Time(now));
        plan.events
            .push((false, "Completed".into(), "Job completed".into()));
    }
}

/// How many pods should be active; for an Indexed Job also the indexes still to run.
fn wanted(job: &Job, _pods: &[Pod], c: &Census, status: &JobStatus) -> (i32, Option<Vec<i32>>) {
    let spec = job.spec.clone().unwrap_or_default();
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    if spec.completion_mode.as_deref() == Some("Indexed") {
        let completions = spec.completions.unwrap_or(0);
        let done = parse_indexes(status.completed_indexes.as_deref().unwrap_or(""));
        let running: BTreeSet<i32> = c.active.iter().filter_map(|p| index(p)).collect();
        let pending: Vec<i32> = (0..completions)
            .filter(|i| !done.contains(i) && !running.contains(i))
            .collect();
        let want = parallelism.min(pending.len() as i32 + running.len() as i32);
        return (want, Some(pending));
    }
    let succeeded = status.succeeded.unwrap_or(0);
    let want = match spec.completions {
        Some(n) => parallelism.min((n - succeeded).max(0)),
        // A work queue: once one pod succeeded, no new pods; the others finish on their own.
        None if succeeded > 0 => c.active.len() as i32,
        None => parallelism,
    };
    (want, None)
}

/// Creates or deletes toward `want` active pods, waiting out the failure back-off first.
fn scale(
    job: &Job,
    pods: &[Pod],
    c: &Census,
    want: i32,
    pending: Option<Vec<i32>>,
    now: Timestamp,
    plan: &mut Plan,
) {
    let mut active: Vec<&Pod> = c.active.clone();
    if pending.is_some() {
        // Indexed: a pod with no valid index, or a second pod of an index, goes.
        let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
        let mut seen = BTreeSet::new();
        active.sort_by_key(|p| (!is_ready(p), p.creation_timestamp().map(|t| t.0)));
        active.retain(|p| match index(p) {
            Some(i) if i < completions && seen.insert(i) => true,
            _ => {
                plan.delete.push(p.name_any());
                false
            }
        });
    }
    let have = active.len() as i32;
    if have > want {
        // Not ready first, then the newest.
        active.sort_by_key(|p| {
            (
                is_ready(p),
                std::cmp::Reverse(p.creation_timestamp().map(|t| t.0)),
            )
        });
        let extra = (have - want) as usize;
        plan.delete
            .extend(active.iter().take(extra).map(|p| p.name_any()));
        active.drain(..extra);
    }
    let missing = (want - have).max(0) as usize;
    if missing > 0 {
        match backoff_remaining(job, pods, now) {
            Some(wait) => {
                plan.requeue = Some(plan.requeue.map_or(wait, |r| r.min(wait)));
            }
            None => {
                plan.create = match pending {
                    Some(p) => p.into_iter().take(missing).map(Some).collect(),
                    None => vec![None; missing],
                };
            }
        }
    }
    plan.status.active = Some(active.len() as i32 + plan.create.len() as i32);
    plan.status.ready = Some(active.iter().filter(|p| is_ready(p)).count() as i32);
}

/// How long until a finished Job's ttlSecondsAfterFinished runs out (zero once it has); None
/// for a Job without one or not finished.
pub fn ttl_left(job: &Job, now: Timestamp) -> Option<Duration> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let status = job.status.as_ref()?;
    let finished = status.completion_time.as_ref().map(|t| t.0).or_else(|| {
        find(status, "Failed")?
            .last_transition_time
            .as_ref()
            .map(|t| t.0)
    })?;
    let due = finished
        .checked_add(SignedDuration::from_secs(ttl.into()))
        .ok()?;
    Some(Duration::try_from(now.duration_until(due)).unwrap_or_default())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
