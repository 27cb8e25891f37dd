//! The node protecting itself, as the kubelet's eviction manager: every `interval` it observes
//! the node's signals, sets the pressure conditions the node reports (`PressureConditions`), and
//! while a threshold is met evicts one pod at a time, ranked by `rank`: the pod's worker stops
//! it and reports it Failed with reason Evicted and upstream's message.

pub mod admit;
pub mod observe;
pub mod pressure;
pub mod rank;
pub mod statfs;
pub mod thresholds;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pod::context::{Context, Ending};
use crate::pod::manager::Manager;
use crate::pod::security::Rejection;

pub use thresholds::{Signal, Threshold};

pub use pressure::PressureConditions;

#[derive(Clone, Debug)]
pub struct Settings {
    pub thresholds: Vec<Threshold>,
    pub transition: Duration,
    pub interval: Duration,
    pub sources: observe::Sources,
    /// Disk pressure first removes unused images (older than the minimum age), as the
    /// kubelet reclaims node-level resources before it evicts a pod.
    pub image_gc: crate::gc::SharedImageGc,
    pub image_min_age: Duration,
}

/// Runs the eviction manager; `conditions` follows the node's pressure.
pub async fn run(
    ctx: Arc<Context>,
    pods: Arc<Manager>,
    settings: Settings,
    conditions: tokio::sync::watch::Sender<BTreeSet<&'static str>>,
) {
    let mut pressure = pressure::Pressure::new(settings.transition);
    loop {
        let observed = observe::node(ctx.cri.as_ref(), &settings.sources).await;
        let verdict = pressure.update(&settings.thresholds, &observed, Instant::now());
        conditions.send_if_modified(|c| {
            let changed = *c != verdict.conditions;
            if changed {
                tracing::info!(conditions = ?verdict.conditions, "node pressure changed");
            }
            *c = verdict.conditions.clone();
            changed
        });
        let first = verdict.act_on.first();
        if let Some(t) = first.and_then(|&i| settings.thresholds.get(i)) {
            if let Some(o) = reclaim(&ctx, &settings, t).await {
                evict_one(&ctx, &pods, t, &o).await;
            }
        }
        tokio::time::sleep(settings.interval).await;
    }
}

/// For disk signals, removes every unused image first; the observation after it, when the
/// threshold (with its minimum reclaim) is still met, else None: no pod needs to go.
async fn reclaim(
    ctx: &Context,
    settings: &Settings,
    t: &Threshold,
) -> Option<thresholds::Observation> {
    let disk = !matches!(
        t.signal,
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable | Signal::PidAvailable
    );
    if disk {
        let mut gc = settings.image_gc.lock().await;
        if let Err(e) = gc
            .free(ctx.cri.as_ref(), u64::MAX, settings.image_min_age)
            .await
        {
            tracing::warn!(error = %e, "removing unused images under disk pressure failed");
        }
    }
    let observed = observe::node(ctx.cri.as_ref(), &settings.sources).await;
    let o = *observed.get(&t.signal)?;
    let extra = t.min_reclaim.as_ref().map_or(0, |r| r.amount(o.capacity));
    if disk && !thresholds::is_met(t, &o, extra) {
        tracing::info!(
            signal = t.signal.name(),
            "disk pressure relieved by removing images; no pod evicted"
        );
        return None;
    }
    Some(o)
}

/// Evicts the first pod in rank for `t` (one per interval, as the kubelet: the next observation
/// shows whether that was enough).
async fn evict_one(ctx: &Arc<Context>, pods: &Manager, t: &Threshold, o: &thresholds::Observation) {
    let usage = observe::pods(ctx).await;
    let pending: Vec<_> = usage
        .into_iter()
        .filter(|u| {
            let uid = u.pod.metadata.uid.as_deref().unwrap_or_default();
            !ctx.is_evicted(uid) && crate::pod::local_storage::recorded(&u.pod).is_none()
        })
        .collect();
    let Some(victim) = rank::rank(&pending, t.signal).into_iter().next() else {
        tracing::warn!(
            signal = t.signal.name(),
            "threshold met and no pod to evict"
        );
        return;
    };
    let message = rank::message(victim, t, o);
    let uid = victim.pod.metadata.uid.clone().unwrap_or_default();
    tracing::warn!(pod = %crate::pod::format_pod(&victim.pod), signal = t.signal.name(), %message, "evicting pod");
    let why = Rejection {
        reason: crate::pod::local_storage::EVICTED,
        message,
    };
    ctx.evict(&uid, Ending { why, grace: None });
    pods.sync(&uid).await;
    wait_for_cleanup(ctx, &uid).await;
}

/// How long an evicted pod is waited for before the next observation (the kubelet's
/// podCleanupTimeout).
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until the evicted pod is stopped and reported (its containers and memory volumes are
/// gone by then), or gone from the API, so the next observation sees what the eviction freed
/// and does not evict a second pod for the same shortage.
async fn wait_for_cleanup(ctx: &Context, uid: &str) {
    let started = Instant::now();
    while started.elapsed() < CLEANUP_TIMEOUT {
        match ctx.pod(uid) {
            Some(p) if crate::pod::local_storage::recorded(&p).is_none() => {}
            _ => return,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::warn!(pod = %uid, "an evicted pod was not cleaned up within 30s");
}

#[cfg(test)]
mod tests;
