//! One worker per pod: a task that syncs the pod serially, woken by pod updates, runtime changes,
//! probe results and back-off timers. A sync is four steps, each in its own file with an explicit
//! input and output:
//!
//! - `observe`: the runtime's sandboxes and containers of the pod -> an `ObservedPod`;
//! - `decide::plan` (pure, in `pod/decide.rs`): spec + observed -> state and actions;
//! - `act`: one action -> an `Outcome` (did the runtime change, which containers wait and why);
//! - `report`: the computed status -> events once per change, the start metric, a status write.
//!
//! Teardown (deletion, or a pod gone from the API) is `teardown`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use super::context::Context;
use super::decide::{self, PodState, Waiting};
use super::local_storage;
use super::observed::ObservedPod;
use super::status::{self, StatusInput};

mod act;
mod hooks;
mod mounts;
mod observe;
pub mod phases;
mod probes;
mod pull;
mod report;
mod sources;
mod start;
mod stop;
mod storage;
mod teardown;
mod token_refresh;

use act::{Actor, Scene};
use phases::{Phase, StartClock};
use probes::PodProbes;
use report::{Report, Reported};
pub use teardown::Teardown;

/// Every pod is synced at least this often even when nothing changed (the kubelet's
/// syncFrequency): configMap and secret volumes follow their objects within it.
pub const RESYNC: Duration = Duration::from_secs(60);

/// How many act-then-observe rounds one sync makes at most (sandbox, init containers one by one,
/// then containers).
const MAX_ROUNDS: usize = 8;

/// Messages to a worker.
#[derive(Debug)]
pub enum Msg {
    /// The pod or its runtime state changed: sync now.
    Sync,
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Cri(#[from] crate::cri::CriError),
    /// A write to the API failed (`action` is "writing status of" or "deleting").
    #[error("{action} pod {pod}: {source}")]
    Api {
        action: &'static str,
        pod: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Worker {
    uid: String,
    ctx: Arc<Context>,
    rx: mpsc::Receiver<Msg>,
    /// Pokes from probe results and background container stops.
    poke_rx: mpsc::Receiver<()>,
    probes: PodProbes,
    actor: Actor,
    /// Containers the agent holds back for reasons outside the state machine (image pulls,
    /// config errors, a failed sandbox), until they start.
    held: BTreeMap<String, Waiting>,
    reported: Reported,
    clock: StartClock,
    storage: storage::StorageCheck,
}

/// What acting until nothing is left to do leaves: the runtime view after the last round, the
/// pod's state, the containers that wait and when to sync again.
struct Converged {
    observed: ObservedPod,
    state: PodState,
    waiting: BTreeMap<String, Waiting>,
    wake: Option<Duration>,
}

impl Worker {
    pub fn new(uid: String, ctx: Arc<Context>, rx: mpsc::Receiver<Msg>) -> Self {
        let (poke_tx, poke_rx) = mpsc::channel(8);
        Worker {
            uid,
            ctx,
            rx,
            poke_rx,
            probes: PodProbes::new(poke_tx.clone()),
            actor: Actor::new(poke_tx),
            held: BTreeMap::new(),
            reported: Reported::default(),
            clock: StartClock::default(),
            storage: storage::StorageCheck::default(),
        }
    }

    pub async fn run(mut self) {
        let mut wake = Duration::ZERO;
        loop {
            tokio::select! {
                msg = self.rx.recv() => {
                    if msg.is_none() {
                        break;
                    }
                }
                _ = self.poke_rx.recv() => {}
                _ = tokio::time::sleep(wake) => {}
            }
            // Coalesce bursts of notifications into one sync.
            while self.rx.try_recv().is_ok() {}
            while self.poke_rx.try_recv().is_ok() {}
            match self.step().await {
                Ok(Some(next)) => wake = next,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(pod = %self.uid, error = %e, "pod sync failed; retrying");
                    wake = Duration::from_secs(2);
                }
            }
        }
        self.probes.stop_all();
        // The pod is gone: an eviction decided for it is done with.
        if let Ok(mut e) = self.ctx.evictions.lock() {
            e.remove(&self.uid);
        }
    }

    /// Syncs or tears down the pod; `None` once it is torn down (the worker ends).
    async fn step(&mut self) -> Result<Option<Duration>, SyncError> {
        match self.ctx.pod(&self.uid) {
            None => self.teardown(None, Teardown::Orphaned).await.map(|_| None),
            Some(p) if p.metadata.deletion_timestamp.is_some() => self
                .teardown(Some(&p), Teardown::Deleted)
                .await
                .map(|_| None),
            Some(p) => self.sync(&p).await.map(Some),
        }
    }

    /// observe -> plan -> act (repeated while it makes progress) -> report. Returns when to sync
    /// again at the latest.
    async fn sync(&mut self, pod: &Pod) -> Result<Duration, SyncError> {
        self.clock.begin();
        let observed = self
            .clock
            .time(Phase::Observe, observe::pod(&self.ctx, &self.uid, pod))
            .await?;
        // Admitted once: a pod already running is never refused afterwards.
        if observed.all_sandbox_ids.is_empty() {
            let pressure = self.ctx.pressure.borrow().clone();
            let admitted = super::admit::admit(&self.ctx.settings.security, pod)
                .and_then(|()| crate::eviction::admit::admit(pod, &pressure))
                .and_then(|()| crate::shutdown::plan::admit(self.ctx.is_shutting_down()));
            if let Err(r) = admitted {
                let status = format!("Pod was rejected: {}", r.message);
                let base = PodStatus::default();
                self.reported
                    .reject(&self.ctx, pod, &r, status, base)
                    .await?;
                return Ok(RESYNC);
            }
        }
        let (deadline, until_deadline) = super::admit::active_deadline(pod, Timestamp::now());
        let ending = self.ctx.eviction(&self.uid);
        let decided = deadline
            .or_else(|| local_storage::recorded(pod))
            .or_else(|| ending.as_ref().map(|e| e.why.clone()));
        let ended = match decided {
            Some(r) => Some(r),
            None => self.storage.evict(&self.ctx, pod, &observed).await,
        };
        if let Some(r) = ended {
            // Past activeDeadlineSeconds, evicted or shut down: everything stops (within the
            // grace period the node gave, if it gave one), the pod Failed for good.
            let grace = ending.and_then(|e| e.grace);
            teardown::stop_containers(&self.ctx, Some(pod), &observed, grace).await?;
            for id in &observed.all_sandbox_ids {
                self.ctx.cri.stop_pod_sandbox(id).await?;
            }
            // A terminated pod's emptyDirs give their memory and disk back, as the kubelet
            // tears down a terminated pod's volumes (an eviction must free what it counted).
            super::volume_fs::unmount_below(&super::volumes::pod_dir(&self.ctx.root, pod));
            super::volumes::remove_empty_dirs(&self.ctx.root, pod);
            self.probes.stop_all();
            let status = r.message.clone();
            let base = self.stopped_status(pod).await?;
            self.reported
                .reject(&self.ctx, pod, &r, status, base)
                .await?;
            return Ok(RESYNC);
        }
        self.probes.seed(pod, &observed);
        let mut done = self.converge(pod, observed).await?;
        for (name, w) in &self.held {
            done.waiting
                .entry(name.clone())
                .or_insert_with(|| w.clone());
        }
        self.probes.manage(pod, &done.observed, &self.ctx.cri);
        let probes = self.probes.snapshot();
        let status = status::compute(&StatusInput {
            pod,
            observed: &done.observed,
            state: &done.state,
            waiting: &done.waiting,
            probes: &probes.view,
            host_ip: &self.ctx.host_ip,
            now: Timestamp::now(),
        });
        let report = Report {
            pod,
            observed: &done.observed,
            waiting: &done.waiting,
            probes: &probes,
        };
        let reporting = self.reported.report(&self.ctx, &report, status);
        self.clock.time(Phase::Status, reporting).await?;
        if let Some(fresh) = self.reported.started() {
            self.clock.tell(&self.ctx.metrics, &pod_key(pod), fresh);
        }
        let tokens = token_refresh::refresh(&self.ctx, pod)
            .await
            .unwrap_or(RESYNC);
        // Periodic resync refreshes configMap/secret volumes and catches anything missed.
        let mut wake = done.wake.unwrap_or(RESYNC).min(RESYNC).min(tokens);
        if local_storage::has_limits(pod) {
            wake = wake.min(storage::INTERVAL);
        }
        Ok(until_deadline.map_or(wake, |d| wake.min(d)))
    }

    /// The status of a pod whose containers were all stopped: each one terminated, none ready.
    async fn stopped_status(&mut self, pod: &Pod) -> Result<PodStatus, SyncError> {
        let observed = observe::pod(&self.ctx, &self.uid, pod).await?;
        let state = PodState::of(pod, &observed, &Default::default());
        Ok(status::compute(&StatusInput {
            pod,
            observed: &observed,
            state: &state,
            waiting: &BTreeMap::new(),
            probes: &Default::default(),
            host_ip: &self.ctx.host_ip,
            now: Timestamp::now(),
        }))
    }

    /// Plans and acts until nothing is left to do now, re-observing after each round so the
    /// status reflects what was done.
    async fn converge(
        &mut self,
        pod: &Pod,
        mut observed: ObservedPod,
    ) -> Result<Converged, SyncError> {
        let mut done = Converged {
            observed: ObservedPod::default(),
            state: PodState::NeedsSandbox { attempt: 0 },
            waiting: BTreeMap::new(),
            wake: None,
        };
        for _ in 0..MAX_ROUNDS {
            let (unhealthy, started) = (self.probes.unhealthy(), self.probes.started());
            let probed = decide::Probed {
                unhealthy: &unhealthy,
                started: &started,
            };
            let (state, plan) = decide::plan(pod, &observed, &probed, now_ns());
            done.state = state;
            done.waiting = plan.waiting.clone();
            done.wake = plan.wake_after;
            if plan.actions.is_empty() {
                break;
            }
            let scene = Scene {
                pod,
                observed: &observed,
                liveness_failures: self.probes.liveness_failures(),
            };
            let mut progressed = false;
            for action in plan.actions {
                let outcome = self
                    .actor
                    .act(&self.ctx, &scene, action, &mut self.clock)
                    .await?;
                progressed |= outcome.progressed;
                done.wake = earliest(done.wake, outcome.retry_after);
                for (name, hold) in outcome.held {
                    match hold {
                        Some(w) => self.held.insert(name, w),
                        None => self.held.remove(&name),
                    };
                }
            }
            observed = self
                .clock
                .time(Phase::Observe, observe::pod(&self.ctx, &self.uid, pod))
                .await?;
            if !progressed {
                break;
            }
        }
        done.observed = observed;
        Ok(done)
    }

    async fn teardown(&mut self, pod: Option<&Pod>, why: Teardown) -> Result<(), SyncError> {
        self.probes.stop_all();
        teardown::run(&self.ctx, &self.uid, pod, why).await?;
        self.ctx.tokens.forget(&self.uid);
        Ok(())
    }
}

/// The sooner of two optional wake-ups.
fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn now_ns() -> i64 {
    i64::try_from(Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
