//! Graceful node shutdown, as the kubelet's (shutdownGracePeriod): while the agent holds a
//! logind delay inhibitor, a shutdown or reboot waits for it. On PrepareForShutdown the node
//! turns NotReady ("node is shutting down"), new pods are refused (NodeShutdown), the regular
//! pods are stopped and then the critical ones (`plan`), each reported Failed with reason
//! Terminated; then the lock is released and the machine goes down. A cancelled shutdown
//! takes the lock again and the node Ready. logind's InhibitDelayMaxSec is raised to the grace
//! period by a drop-in when lower. Off (as upstream) while --shutdown-grace-period is 0.

pub mod logind;
pub mod plan;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use crate::pod::context::{Context, Ending};
use crate::pod::manager::Manager;
use crate::pod::security::Rejection;
pub use plan::Settings;

/// Where the drop-in goes (logind reads every *.conf there over logind.conf).
pub const LOGIND_DROP_IN: &str = "/etc/systemd/logind.conf.d/99-keelson-agent.conf";
/// The last shutdown's start and end, under the root directory (upstream's file name): its
/// metrics after the reboot.
const STATE_FILE: &str = "graceful_node_shutdown_state";

/// Runs the shutdown manager for as long as the agent runs. `not_ready` is the node status
/// loop's own reason for Ready=False.
pub async fn run(
    ctx: Arc<Context>,
    pods: Arc<Manager>,
    settings: Settings,
    not_ready: tokio::sync::watch::Sender<Option<String>>,
) {
    if !settings.enabled() {
        return;
    }
    let state_file = ctx.root.join(STATE_FILE);
    let (start, end) = read_state(&state_file);
    ctx.metrics.set_graceful_shutdown(start, end);
    let logind = match prepare(&settings).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "graceful node shutdown unavailable: pods will not be stopped before the node shuts down");
            return;
        }
    };
    let (logind, mut signals, lock) = logind;
    let mut lock = Some(lock);
    tracing::info!(grace = ?settings.grace, critical = ?settings.critical_grace, "holding a logind delay inhibitor for node shutdown");
    while let Some(starting) = signals.next().await {
        if starting && lock.is_some() {
            tracing::warn!("node shutting down: stopping pods");
            ctx.shutting_down.store(true, Ordering::Relaxed);
            not_ready.send_replace(Some(plan::NOT_READY.into()));
            let started = Timestamp::now();
            write_state(&state_file, started, None);
            ctx.metrics.set_graceful_shutdown(Some(started), None);
            stop_pods(&ctx, &pods, &settings).await;
            let ended = Timestamp::now();
            write_state(&state_file, started, Some(ended));
            ctx.metrics
                .set_graceful_shutdown(Some(started), Some(ended));
            // Closing the descriptor lets logind go on.
            lock = None;
            tracing::warn!("pods stopped; inhibitor released, the node shuts down");
        } else if !starting && lock.is_none() {
            tracing::info!("node shutdown cancelled");
            match logind.inhibit().await {
                Ok(fd) => lock = Some(fd),
                Err(e) => tracing::error!(error = %e, "taking the inhibitor lock again failed"),
            }
            ctx.shutting_down.store(false, Ordering::Relaxed);
            not_ready.send_replace(None);
        }
    }
    tracing::error!("logind's signals ended: node shutdown no longer watched");
}

type Prepared = (
    logind::Logind,
    futures::stream::BoxStream<'static, bool>,
    std::os::fd::OwnedFd,
);

/// Connects to logind, raises its InhibitDelayMaxSec when below the grace period, watches
/// PrepareForShutdown and takes the lock (in that order: no shutdown slips between them).
async fn prepare(settings: &Settings) -> Result<Prepared, String> {
    let logind = logind::Logind::connect()
        .await
        .map_err(|e| format!("connecting to logind on the system bus: {e}"))?;
    let delay = |e: zbus::Error| format!("reading logind's InhibitDelayMaxUSec: {e}");
    let current = logind.inhibit_delay().await.map_err(delay)?;
    if current < settings.grace {
        raise_inhibit_delay(&logind, settings.grace, current).await?;
    }
    let signals = logind
        .shutdowns()
        .await
        .map_err(|e| format!("watching logind's PrepareForShutdown: {e}"))?;
    let lock = logind
        .inhibit()
        .await
        .map_err(|e| format!("taking logind's shutdown delay lock: {e}"))?;
    Ok((logind, signals, lock))
}

/// Writes the drop-in, reloads logind and checks that it took the new value.
async fn raise_inhibit_delay(
    logind: &logind::Logind,
    grace: Duration,
    current: Duration,
) -> Result<(), String> {
    let path = Path::new(LOGIND_DROP_IN);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, plan::logind_drop_in(grace)));
    written.map_err(|e| format!("writing {}: {e}", path.display()))?;
    logind
        .reload()
        .await
        .map_err(|e| format!("reloading logind after writing {}: {e}", path.display()))?;
    let mut now = current;
    // logind rereads its files once the signal is handled.
    for _ in 0..50 {
        now = logind.inhibit_delay().await.unwrap_or(now);
        if now >= grace {
            tracing::info!(file = %path.display(), delay = ?now, "logind's InhibitDelayMaxSec raised");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "logind's InhibitDelayMaxSec is {}s after writing {}, less than --shutdown-grace-period {}s",
        now.as_secs(),
        path.display(),
        grace.as_secs()
    ))
}

/// Stops the pods group by group; each group is waited for until its pods are stopped and
/// reported, or its period (and a second to report) is over.
async fn stop_pods(ctx: &Context, pods: &Manager, settings: &Settings) {
    let running: Vec<_> = ctx
        .all_pods()
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .collect();
    for group in plan::groups(&running, settings) {
        let uids: Vec<&str> = group.pods.iter().map(|(u, _)| u.as_str()).collect();
        tracing::info!(pods = ?uids, period = ?group.period, "stopping pods for node shutdown");
        for (uid, grace) in &group.pods {
            let why = Rejection {
                reason: plan::REASON,
                message: plan::MESSAGE.into(),
            };
            let grace = Some(*grace);
            ctx.evict(uid, Ending { why, grace });
            pods.sync(uid).await;
        }
        let deadline = Instant::now() + group.period + Duration::from_secs(1);
        loop {
            let mut left = Vec::new();
            for uid in &uids {
                if !stopped(ctx, uid).await {
                    left.push(*uid);
                }
            }
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(pods = ?left, "pods not stopped within their shutdown period");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether the pod's containers are stopped and, for a pod from the API, its ended status is
/// written (Terminated, or NodeShutdown for one that had not started; a static pod has no
/// status of its own).
async fn stopped(ctx: &Context, uid: &str) -> bool {
    let Some(pod) = ctx.pod(uid) else {
        return true;
    };
    let labels = HashMap::from([(crate::cri::labels::POD_UID.to_string(), uid.to_string())]);
    let running = match ctx.cri.list_containers(labels).await {
        Ok(cs) => cs.iter().any(|c| {
            c.state == keelson_proto::runtime::v1::ContainerState::ContainerRunning as i32
        }),
        Err(_) => true,
    };
    let from_file = ctx.static_pods.read().is_ok_and(|s| s.contains_key(uid));
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let reported = matches!(phase, Some("Failed" | "Succeeded"));
    !running && (from_file || reported)
}

/// The last shutdown's start and end from the state file.
fn read_state(path: &Path) -> (Option<Timestamp>, Option<Timestamp>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (None, None);
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let at = |k: &str| v.get(k)?.as_str()?.parse::<Timestamp>().ok();
    (at("startTime"), at("endTime"))
}

fn write_state(path: &Path, start: Timestamp, end: Option<Timestamp>) {
    let v = match end {
        Some(end) => {
            serde_json::json!({ "startTime": start.to_string(), "endTime": end.to_string() })
        }
        None => serde_json::json!({ "startTime": start.to_string() }),
    };
    let written = std::fs::write(path, v.to_string());
    if let Err(e) = written {
        tracing::warn!(file = %path.display(), error = %e, "recording the node shutdown failed");
    }
}
