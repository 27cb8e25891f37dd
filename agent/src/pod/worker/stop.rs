//! Stopping one container the way the kubelet does: its preStop hook first, then StopContainer,
//! both within the pod's grace period. Used for liveness kills and for teardown.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};

use crate::cri::{Cri, CriResult};
use crate::pod::probe;

/// A running container to stop.
pub struct Stop<'a> {
    /// Its spec, when the pod still has it (for the preStop hook).
    pub spec: Option<&'a Container>,
    pub id: &'a str,
    pub pod_ip: &'a str,
    /// Seconds the container has to exit after SIGTERM.
    pub grace: i64,
}

/// Runs the preStop hook (if any), then stops the container.
pub async fn container(cri: &dyn Cri, stop: Stop<'_>) -> CriResult<()> {
    if let Some(spec) = stop.spec {
        pre_stop(cri, spec, stop.id, stop.pod_ip, stop.grace).await;
    }
    cri.stop_container(stop.id, stop.grace).await
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

/// preStop hook (exec, httpGet, tcpSocket or sleep), bounded by the grace period.
async fn pre_stop(cri: &dyn Cri, container: &Container, id: &str, pod_ip: &str, grace: i64) {
    let Some(handler) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.clone())
    else {
        return;
    };
    let budget = Duration::from_secs(u64::try_from(grace.max(1)).unwrap_or(30));
    if let Some(sleep) = handler.sleep.as_ref() {
        tokio::time::sleep(
            Duration::from_secs(u64::try_from(sleep.seconds.max(0)).unwrap_or(0)).min(budget),
        )
        .await;
        return;
    }
    // The hook's handlers are those of a probe: run it as one, once.
    let probe = Probe {
        exec: handler.exec.clone(),
        http_get: handler.http_get.clone(),
        tcp_socket: handler.tcp_socket.clone(),
        timeout_seconds: Some(i32::try_from(grace.max(1)).unwrap_or(30)),
        ..Default::default()
    };
    let result = tokio::time::timeout(
        budget,
        probe::probe_once(&probe, container, pod_ip, id, cri),
    )
    .await
    .map(|ran| ran.map_err(|e| e.to_string()));
    tracing::info!(container = %container.name, ?result, "preStop hook ran");
}
