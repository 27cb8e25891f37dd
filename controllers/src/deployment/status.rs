//! The status of a Deployment that `kubectl rollout status` reads: observedGeneration,
//! updated/ready/available replicas, and the Available and Progressing conditions with
//! upstream's reasons (syncRolloutStatus, checkPausedConditions), including
//! ProgressDeadlineExceeded once no progress was seen for progressDeadlineSeconds.

use super::rollout::{max_unavailable, spec_replicas, status_of};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use std::time::Duration;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";

/// A condition as upstream's NewDeploymentCondition makes it, both times `now` (to the second,
/// as the API serializes them).
pub fn condition(type_: &str, status: &str, reason: &str, message: String) -> DeploymentCondition {
    let now = Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_default());
    DeploymentCondition {
        type_: Some(type_.into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(now.clone()),
        last_update_time: Some(now),
    }
}

pub fn get<'a>(st: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    st.conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

fn reason(c: Option<&DeploymentCondition>) -> Option<&str> {
    c.and_then(|c| c.reason.as_deref())
}

fn remove(st: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = st.conditions.as_mut() {
        cs.retain(|c| c.type_.as_deref() != Some(type_));
    }
}

/// Upstream's SetDeploymentCondition: no change for the same status and reason; the
/// transition time kept while the status stays.
pub fn set(st: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let type_ = c.type_.clone().unwrap_or_default();
    if let Some(cur) = get(st, &type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove(st, &type_);
    st.conditions.get_or_insert_with(Vec::new).push(c);
}

/// progressDeadlineSeconds, unless unset or the "never" value.
pub fn progress_deadline(d: &Deployment) -> Option<Duration> {
    match d.spec.progress_deadline_seconds {
        Some(s) if s != i32::MAX => Some(Duration::from_secs(s.max(0) as u64)),
        _ => None,
    }
}

/// Upstream's calculateStatus: counts, and the Available condition beside the conditions
/// already there.
pub fn status(d: &Deployment, new: Option<&ReplicaSet>, olds: &[ReplicaSet]) -> DeploymentStatus {
    let replicas = d.spec.replicas.unwrap_or(1);
    let all: Vec<&ReplicaSet> = olds.iter().chain(new).collect();
    let (total, ready, available) = all
        .iter()
        .map(|r| status_of(r))
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    let wanted: i32 = all.iter().map(|r| spec_replicas(r)).sum();
    let old = d.status.clone().unwrap_or_default();
    let mut st = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(total),
        updated_replicas: Some(new.map_or(0, |n| status_of(n).0)),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        unavailable_replicas: Some((wanted - available).max(0)),
        conditions: old.conditions.clone(),
        collision_count: old.collision_count,
        ..Default::default()
    };
    if available >= replicas - max_unavailable(d) {
        let msg = "Deployment has minimum availability.".to_string();
        set(
            &mut st,
            condition(AVAILABLE, "True", "MinimumReplicasAvailable", msg),
        );
    } else {
        let msg = "Deployment does not have minimum availability.".to_string();
        set(
            &mut st,
            condition(AVAILABLE, "False", "MinimumReplicasUnavailable", msg),
        );
    }
    st
}

/// Upstream's DeploymentComplete: every replica updated and available, none old left.
pub fn complete(d: &Deployment, st: &DeploymentStatus) -> bool {
    let replicas = Some(d.spec.replicas.unwrap_or(1));
    st.updated_replicas == replicas
        && st.replicas == replicas
        && st.available_replicas == replicas
        && st.observed_generation >= d.metadata.generation
}

/// Upstream's DeploymentProgressing: more updated, ready or available replicas, or fewer old.
fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_olds = n(old.replicas) - n(old.updated_replicas);
    let new_olds = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_olds < old_olds
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// Upstream's DeploymentTimedOut: the deadline passed since the last progress noted.
fn timed_out(d: &Deployment, st: &DeploymentStatus, now: Timestamp) -> bool {
    let (Some(deadline), Some(c)) = (progress_deadline(d), get(st, PROGRESSING)) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| now.duration_since(t.0).as_secs_f64() > deadline.as_secs_f64()),
    }
}

/// Upstream's syncRolloutStatus: the status with the Progressing condition that the rollout
/// has earned.
pub fn rollout_status(
    d: &Deployment,
    new: Option<&ReplicaSet>,
    olds: &[ReplicaSet],
    now: Timestamp,
) -> DeploymentStatus {
    let mut st = status(d, new, olds);
    if progress_deadline(d).is_none() {
        remove(&mut st, PROGRESSING);
        return st;
    }
    let current = d.status.as_ref().and_then(|s| get(s, PROGRESSING)).cloned();
    let finished =
        st.replicas == st.updated_replicas && reason(current.as_ref()) == Some(NEW_RS_AVAILABLE);
    if finished {
        return st;
    }
    let subject = match new {
        Some(n) => format!("ReplicaSet {:?}", n.name_any()),
        None => format!("Deployment {:?}", d.name_any()),
    };
    if complete(d, &st) {
        let msg = format!("{subject} has successfully progressed.");
        set(
            &mut st,
            condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg),
        );
    } else if progressing(d, &st) {
        // Progress moves lastUpdateTime even with the same reason: the deadline counts from it.
        let mut c = condition(
            PROGRESSING,
            "True",
            RS_UPDATED,
            format!("{subject} is progressing."),
        );
        if let Some(cur) = current.filter(|c| c.status.as_deref() == Some("True")) {
            c.last_transition_time = cur.last_transition_time;
        }
        remove(&mut st, PROGRESSING);
        set(&mut st, c);
    } else if timed_out(d, &st, now) {
        let msg = format!("{subject} has timed out progressing.");
        set(&mut st, condition(PROGRESSING, "False", TIMED_OUT, msg));
    }
    st
}

/// Upstream's checkPausedConditions: Progressing Unknown with DeploymentPaused while paused,
/// DeploymentResumed once resumed (so the deadline does not count the pause), never over a
/// ProgressDeadlineExceeded. None when nothing changes.
pub fn paused_conditions(d: &Deployment) -> Option<DeploymentStatus> {
    progress_deadline(d)?;
    let mut st = d.status.clone().unwrap_or_default();
    let cur = reason(get(&st, PROGRESSING));
    if cur == Some(TIMED_OUT) {
        return None;
    }
    let paused = d.spec.paused.unwrap_or(false);
    let c = match (paused, cur == Some(PAUSED)) {
        (true, false) => condition(
            PROGRESSING,
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
        ),
        (false, true) => condition(
            PROGRESSING,
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
        ),
        _ => return None,
    };
    set(&mut st, c);
    Some(st)
}

/// When a rollout still in progress should be looked at again: at its deadline (upstream's
/// requeueStuckDeployment).
pub fn recheck_after(d: &Deployment, st: &DeploymentStatus, now: Timestamp) -> Option<Duration> {
    let deadline = progress_deadline(d)?;
    let c = get(st, PROGRESSING)?;
    if c.reason.as_deref() != Some(RS_UPDATED) || complete(d, st) {
        return None;
    }
    let since = now
        .duration_since(c.last_update_time.as_ref()?.0)
        .as_secs_f64();
    let left = deadline.as_secs_f64() - since.max(0.0);
    Some(Duration::from_secs_f64(left.max(0.0) + 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deploy, rs};

    fn reason_of(st: &DeploymentStatus, type_: &str) -> String {
        reason(get(st, type_)).unwrap_or_default().to_string()
    }

    #[test]
    fn status_reports_what_rollout_status_reads() {
        let d = deploy(3);
        let st = status(&d, Some(&rs("web-abc", 3, 3, 3)), &[]);
        assert_eq!(st.observed_generation, Some(3));
        assert_eq!(
            (st.replicas, st.updated_replicas, st.available_replicas),
            (Some(3), Some(3), Some(3))
        );
        assert_eq!(reason_of(&st, AVAILABLE), "MinimumReplicasAvailable");
        let st = status(&d, Some(&rs("web-abc", 3, 3, 0)), &[]);
        assert_eq!(
            get(&st, AVAILABLE).unwrap().status.as_deref(),
            Some("False")
        );
    }

    #[test]
    fn progressing_reasons_follow_the_rollout() {
        let now = Timestamp::now();
        let mut d = deploy(3);
        d.status = Some(status(
            &d,
            Some(&rs("web-new", 3, 0, 0)),
            &[rs("web-old", 3, 3, 3)],
        ));
        set(
            d.status.as_mut().unwrap(),
            condition(PROGRESSING, "True", NEW_RS_CREATED, "x".into()),
        );
        // More pods available: progress.
        let st = rollout_status(
            &d,
            Some(&rs("web-new", 3, 2, 2)),
            &[rs("web-old", 1, 1, 1)],
            now,
        );
        assert_eq!(reason_of(&st, PROGRESSING), RS_UPDATED);
        // Everything updated and available: done.
        let st = rollout_status(&d, Some(&rs("web-new", 3, 3, 3)), &[], now);
        let c = get(&st, PROGRESSING).unwrap();
        assert_eq!(c.reason.as_deref(), Some(NEW_RS_AVAILABLE));
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-new\" has successfully progressed.")
        );
    }

    #[test]
    fn no_progress_past_the_deadline_times_out() {
        let mut d = deploy(3);
        d.spec.progress_deadline_seconds = Some(10);
        let new = rs("web-new", 3, 3, 0);
        let mut st = status(&d, Some(&new), &[]);
        set(
            &mut st,
            condition(PROGRESSING, "True", RS_UPDATED, "x".into()),
        );
        d.status = Some(st.clone());
        let soon = Timestamp::now() + Duration::from_secs(5);
        assert_eq!(
            reason_of(&rollout_status(&d, Some(&new), &[], soon), PROGRESSING),
            RS_UPDATED
        );
        let after = recheck_after(&d, &st, soon).unwrap();
        assert!(after <= Duration::from_secs(7), "{after:?}");
        let late = Timestamp::now() + Duration::from_secs(11);
        let st = rollout_status(&d, Some(&new), &[], late);
        let c = get(&st, PROGRESSING).unwrap();
        assert_eq!(
            (c.status.as_deref(), c.reason.as_deref()),
            (Some("False"), Some(TIMED_OUT))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-new\" has timed out progressing.")
        );
        // Pausing does not hide a timeout.
        d.status = Some(st);
        d.spec.paused = Some(true);
        assert_eq!(paused_conditions(&d), None);
    }

    #[test]
    fn pause_and_resume_are_unknown_progress() {
        let mut d = deploy(3);
        d.spec.paused = Some(true);
        let st = paused_conditions(&d).unwrap();
        let c = get(&st, PROGRESSING).unwrap();
        assert_eq!(
            (c.status.as_deref(), c.reason.as_deref()),
            (Some("Unknown"), Some(PAUSED))
        );
        d.status = Some(st);
        assert_eq!(paused_conditions(&d), None, "already paused");
        d.spec.paused = Some(false);
        assert_eq!(
            reason_of(&paused_conditions(&d).unwrap(), PROGRESSING),
            RESUMED
        );
        d.spec.progress_deadline_seconds = Some(i32::MAX);
        assert_eq!(paused_conditions(&d), None, "no deadline, no condition");
    }
}
