//! Stopping one container the way the kubelet does: its preStop hook first, then StopContainer,
//! both within the pod's grace period. Used for liveness kills and for teardown.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::time::Instant;

use super::hooks::{self, HookError};
use crate::cri::{Cri, CriResult};
use crate::pod::events::{Kind, Recorder};

/// The shortest time a container gets between SIGTERM and SIGKILL, whatever the hook took or
/// the grace period says (the kubelet's minimumGracePeriodInSeconds).
pub const MINIMUM_GRACE_SECONDS: i64 = 2;

/// A running container to stop.
pub struct Stop<'a> {
    /// Its spec, when the pod still has it (for the preStop hook).
    pub spec: Option<&'a Container>,
    pub id: &'a str,
    pub pod_ip: &'a str,
    /// The pod's grace period in seconds: the hook and SIGTERM-to-SIGKILL share it.
    pub grace: i64,
    /// Where a failed hook is reported (a FailedPreStopHook event on the pod).
    pub report: Option<(&'a Recorder, &'a Pod)>,
}

/// Runs the preStop hook (if any), then stops the container with what is left of the grace
/// period. A hook that fails or times out is reported; the container is stopped anyway.
pub async fn container(cri: &dyn Cri, stop: Stop<'_>) -> CriResult<()> {
    let mut grace = stop.grace;
    let hook = stop
        .spec
        .and_then(|c| c.lifecycle.as_ref()?.pre_stop.as_ref().map(|h| (c, h)));
    // As the kubelet: no time left, no hook.
    if let Some((spec, handler)) = hook.filter(|_| grace > 0) {
        let started = Instant::now();
        let budget = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        let target = hooks::Target {
            id: stop.id,
            pod_ip: stop.pod_ip,
            exec_timeout: stop.grace,
        };
        let ran = match tokio::time::timeout(budget, hooks::run(cri, handler, spec, &target)).await
        {
            Ok(ran) => ran,
            Err(_) => Err(HookError::TimedOut(grace)),
        };
        let took = started.elapsed();
        tracing::info!(container = %spec.name, ?took, ok = ran.is_ok(), "preStop hook ran");
        if let Err(why) = ran {
            report_failure(&stop, &spec.name, &why);
        }
        grace = grace_after_hook(grace, took);
    }
    cri.stop_container(stop.id, grace.max(MINIMUM_GRACE_SECONDS))
        .await
}

/// What is left of the grace period once the hook took `took`: whole seconds, as the kubelet
/// counts them, and never under the minimum.
pub fn grace_after_hook(grace: i64, took: Duration) -> i64 {
    let took = i64::try_from(took.as_secs()).unwrap_or(i64::MAX);
    grace.saturating_sub(took).max(MINIMUM_GRACE_SECONDS)
}

/// The pod's grace period: the deletion's, else the spec's, else 30 s.
pub fn grace_seconds(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0)
}

/// The FailedPreStopHook event. As the kubelet, a failed handler's output stays out of the
/// event (it may hold secrets) and goes to the agent's log.
fn report_failure(stop: &Stop<'_>, name: &str, why: &HookError) {
    tracing::warn!(container = %name, error = %why, "preStop hook failed");
    let Some((events, pod)) = stop.report else {
        return;
    };
    let message = match why {
        HookError::TimedOut(_) => format!("PreStopHook {why}"),
        _ => "PreStopHook failed".to_string(),
    };
    events.pod(pod, Some(name), Kind::Warning, "FailedPreStopHook", message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_time_comes_off_the_grace_period_down_to_two_seconds() {
        assert_eq!(grace_after_hook(30, Duration::from_millis(3900)), 27);
        assert_eq!(grace_after_hook(30, Duration::ZERO), 30);
        assert_eq!(grace_after_hook(5, Duration::from_secs(4)), 2);
        assert_eq!(grace_after_hook(5, Duration::from_secs(60)), 2);
        assert_eq!(grace_after_hook(0, Duration::ZERO), 2);
    }
}
