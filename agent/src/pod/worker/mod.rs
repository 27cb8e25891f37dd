//! One worker per pod: a task that syncs the pod serially (observe CRI, plan, act, report
//! status), woken by pod updates, runtime changes, probe results and back-off timers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodStatus, Secret};
use k8s_openapi::jiff::Timestamp;
use keelson_proto::runtime::v1 as cri;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use tokio::sync::mpsc;

use super::context::Context;
use super::decide::{self, Action, PodState, Waiting};
use super::events::Kind;
use super::observed::{ObservedPod, RunState};
use super::probe::{self, Probers, SharedProbes};
use super::status::{self, StatusInput};
use super::{env, translate, volumes};
use crate::backoff;
use crate::cri::labels;

/// Every pod is synced at least this often even when nothing changed (the kubelet's
/// syncFrequency): configMap and secret volumes follow their objects within it.
pub const RESYNC: Duration = Duration::from_secs(60);

/// Messages to a worker.
#[derive(Debug)]
pub enum Msg {
    /// The pod or its runtime state changed: sync now.
    Sync,
}

/// Why the pod is being torn down.
enum Teardown {
    /// deletionTimestamp is set: stop within the grace period, then delete the API object.
    Deleted,
    /// The pod no longer exists in the API (force-deleted, or deleted while the agent was down).
    Orphaned,
}

pub struct Worker {
    uid: String,
    ctx: Arc<Context>,
    rx: mpsc::Receiver<Msg>,
    poke_tx: mpsc::Sender<()>,
    poke_rx: mpsc::Receiver<()>,
    probes: SharedProbes,
    probers: Probers,
    pulls: HashMap<String, PullFailure>,
    /// Containers the agent holds back for reasons outside the state machine (image pulls, config).
    held: BTreeMap<String, Waiting>,
    last_written: Option<PodStatus>,
    start_recorded: bool,
    seeded: bool,
    /// Containers being stopped in the background (liveness failures), so a slow stop within
    /// the grace period does not hold up status updates.
    killing: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// Waiting reasons and readiness already announced by events, so each is sent once.
    announced_waiting: BTreeMap<String, String>,
    announced_unready: std::collections::HashSet<String>,
}

impl Worker {
    pub fn new(uid: String, ctx: Arc<Context>, rx: mpsc::Receiver<Msg>) -> Self {
        let (poke_tx, poke_rx) = mpsc::channel(8);
        Worker {
            uid,
            ctx,
            rx,
            poke_tx,
            poke_rx,
            probes: SharedProbes::default(),
            probers: Probers::default(),
            pulls: HashMap::new(),
            held: BTreeMap::new(),
            last_written: None,
            start_recorded: false,
            seeded: false,
            killing: Arc::default(),
            announced_waiting: BTreeMap::new(),
            announced_unready: std::collections::HashSet::new(),
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
            let pod = self.ctx.pod(&self.uid);
            let outcome = match pod {
                None => self.teardown(None, Teardown::Orphaned).await.map(|_| None),
                Some(p) if p.metadata.deletion_timestamp.is_some() => self
                    .teardown(Some(&p), Teardown::Deleted)
                    .await
                    .map(|_| None),
                Some(p) => self.sync(&p).await.map(Some),
            };
            match outcome {
                Ok(Some(next)) => wake = next,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(pod = %self.uid, error = %e, "pod sync failed; retrying");
                    wake = Duration::from_secs(2);
                }
            }
        }
        self.probers.stop_all();
    }

    /// Observes the pod's sandboxes and containers in the runtime (by the pod UID label).
    async fn observe(&self) -> Result<ObservedPod, crate::cri::CriError> {
        let cri = &self.ctx.cri;
        let selector = HashMap::from([(labels::POD_UID.to_string(), self.uid.clone())]);
        let sandboxes = cri.list_pod_sandbox(selector.clone()).await?;
        let mut ips = Vec::new();
        for s in sandboxes
            .iter()
            .filter(|s| s.state == cri::PodSandboxState::SandboxReady as i32)
        {
            match cri.pod_sandbox_status(&s.id).await {
                Ok(st) => ips.push((s.id.clone(), st.network.map(|n| n.ip).unwrap_or_default())),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let mut containers = Vec::new();
        for c in cri.list_containers(selector).await? {
            match cri.container_status(&c.id).await {
                Ok(st) => containers.push((c.pod_sandbox_id.clone(), st)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ObservedPod::from_cri(&sandboxes, &ips, &containers))
    }

    async fn sync(&mut self, pod: &Pod) -> Result<Duration, SyncError> {
        let mut observed = self.observe().await?;
        termination_messages(&self.ctx.root, pod, &mut observed);
        self.seed_probes(pod, &observed);
        let mut wake: Option<Duration> = None;
        let mut waiting = BTreeMap::new();
        let mut state = PodState::NeedsSandbox { attempt: 0 };
        // Act until nothing is left to do now (sandbox, then init containers one by one, then
        // containers), re-observing after each round so the status reflects what was done.
        for _ in 0..8 {
            let unhealthy = self
                .probes
                .lock()
                .map(|t| t.unhealthy.clone())
                .unwrap_or_default();
            let (s, plan) = decide::plan(pod, &observed, &unhealthy, now_ns());
            state = s;
            waiting = plan.waiting.clone();
            wake = plan.wake_after;
            if plan.actions.is_empty() {
                break;
            }
            let mut progressed = false;
            for action in plan.actions {
                progressed |= self.act(pod, &observed, action, &mut wake).await?;
            }
            observed = self.observe().await?;
            termination_messages(&self.ctx.root, pod, &mut observed);
            if !progressed {
                break;
            }
        }
        for (name, w) in &self.held {
            waiting.entry(name.clone()).or_insert_with(|| w.clone());
        }
        self.manage_probes(pod, &observed);
        self.announce(pod, &observed, &waiting);
        let probe_view = self
            .probes
            .lock()
            .map(|t| t.view.clone())
            .unwrap_or_default();
        let status = status::compute(&StatusInput {
            pod,
            observed: &observed,
            state: &state,
            waiting: &waiting,
            probes: &probe_view,
            host_ip: &self.ctx.host_ip,
            now: Timestamp::now(),
        });
        self.record_start(pod, &status);
        self.write_status(pod, status).await?;
        // Periodic resync refreshes configMap/secret volumes and catches anything missed.
        Ok(wake.unwrap_or(RESYNC).min(RESYNC))
    }

    /// Performs one action; returns whether it changed the runtime.
    async fn act(
        &mut self,
        pod: &Pod,
        observed: &ObservedPod,
        action: Action,
        wake: &mut Option<Duration>,
    ) -> Result<bool, SyncError> {
        let cri = self.ctx.cri.clone();
        match action {
            Action::CreateSandbox { attempt } => {
                for id in &observed.all_sandbox_ids {
                    cri.stop_pod_sandbox(id).await?;
                    cri.remove_pod_sandbox(id).await?;
                }
                let config = translate::sandbox_config(&self.ctx.settings, pod, attempt);
                let _ = std::fs::create_dir_all(&config.log_directory);
                match cri.run_pod_sandbox(config).await {
                    Ok(_) => Ok(true),
                    Err(e) => {
                        tracing::warn!(pod = %pod_key(pod), error = %e, "sandbox creation failed");
                        self.ctx.events.pod(
                            pod,
                            None,
                            Kind::Warning,
                            "FailedCreatePodSandBox",
                            format!("Failed to create pod sandbox: {e}"),
                        );
                        for c in decide::regular_containers(pod)
                            .iter()
                            .chain(decide::init_containers(pod))
                        {
                            self.held.insert(
                                c.name.clone(),
                                Waiting {
                                    reason: "ContainerCreating".into(),
                                    message: e.to_string(),
                                },
                            );
                        }
                        *wake = Some(Duration::from_secs(3));
                        Ok(false)
                    }
                }
            }
            Action::StartContainer {
                name,
                init,
                attempt,
            } => {
                let Some(container) = find_container(pod, &name, init) else {
                    return Ok(false);
                };
                let Some(sandbox) = observed.sandbox.clone() else {
                    return Ok(false);
                };
                match self
                    .start_container(
                        pod,
                        &container,
                        init,
                        attempt,
                        &sandbox.id,
                        sandbox.attempt,
                        sandbox.ip.as_deref().unwrap_or(""),
                    )
                    .await
                {
                    Ok(()) => {
                        self.held.remove(&name);
                        Ok(true)
                    }
                    Err(w) => {
                        tracing::info!(pod = %pod_key(pod), container = %name, reason = %w.reason, message = %w.message, "container not started");
                        self.held.insert(name, w);
                        let retry = self.pull_retry_in().unwrap_or(Duration::from_secs(5));
                        *wake = Some(wake.map_or(retry, |w| w.min(retry)));
                        Ok(false)
                    }
                }
            }
            Action::KillContainer { id, name, reason } => {
                let fresh = self
                    .killing
                    .lock()
                    .map(|mut k| k.insert(id.clone()))
                    .unwrap_or(false);
                if !fresh {
                    return Ok(false);
                }
                tracing::info!(pod = %pod_key(pod), container = %name, %reason, "killing container");
                let why = self
                    .probes
                    .lock()
                    .ok()
                    .and_then(|t| t.last_failure.get(&(id.clone(), "Liveness")).cloned());
                if let Some(why) = why {
                    self.ctx.events.pod(
                        pod,
                        Some(&name),
                        Kind::Warning,
                        "Unhealthy",
                        format!("Liveness probe failed: {why}"),
                    );
                }
                self.ctx.events.pod(
                    pod,
                    Some(&name),
                    Kind::Normal,
                    "Killing",
                    format!("Container {name} {reason}, will be restarted"),
                );
                let grace = grace_seconds(pod);
                let spec = find_container(pod, &name, false);
                let ip = observed
                    .sandbox
                    .as_ref()
                    .and_then(|s| s.ip.clone())
                    .unwrap_or_default();
                let (killing, poke) = (self.killing.clone(), self.poke_tx.clone());
                tokio::spawn(async move {
                    if let Some(c) = spec {
                        pre_stop(cri.as_ref(), &c, &id, &ip, grace).await;
                    }
                    if let Err(e) = cri.stop_container(&id, grace).await {
                        tracing::warn!(container = %id, error = %e, "stopping container failed");
                    }
                    if let Ok(mut k) = killing.lock() {
                        k.remove(&id);
                    }
                    let _ = poke.try_send(());
                });
                Ok(false)
            }
            Action::StopSandbox { id } => {
                cri.stop_pod_sandbox(&id).await?;
                Ok(true)
            }
            Action::RemoveContainers { ids } => {
                for id in ids {
                    if let Err(e) = cri.remove_container(&id).await {
                        tracing::debug!(container = %id, error = %e, "remove failed");
                    }
                }
                Ok(false)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_container(
        &mut self,
        pod: &Pod,
        container: &Container,
        init: bool,
        attempt: u32,
        sandbox_id: &str,
        sandbox_attempt: u32,
        pod_ip: &str,
    ) -> Result<(), Waiting> {
        let sandbox_config = translate::sandbox_config(&self.ctx.settings, pod, sandbox_attempt);
        let image_ref = self.ensure_image(pod, container, &sandbox_config).await?;
        let config_error = |message: String| Waiting {
            reason: "CreateContainerConfigError".into(),
            message,
        };
        let (env_sources, objects) = self
            .fetch_sources(pod, container)
            .await
            .map_err(config_error)?;
        let paths = volumes::prepare(&self.ctx.root, pod, &objects)
            .map_err(|e| config_error(e.to_string()))?;
        let mut mounts =
            volumes::mounts_for(pod, container, &paths).map_err(|e| config_error(e.to_string()))?;
        let termination = volumes::termination_mount(&self.ctx.root, pod, container, attempt)
            .map_err(|e| config_error(format!("termination log: {e}")))?;
        mounts.push(termination);
        let env = env::resolve(pod, container, pod_ip, &self.ctx.host_ip, &env_sources)
            .map_err(|e| config_error(e.to_string()))?;
        let config = translate::container_config(&translate::ContainerInput {
            pod,
            container,
            init,
            attempt,
            image_ref: &image_ref,
            env: &env,
            mounts: &mounts,
            node_name: &self.ctx.settings.node_name,
        });
        let cri = &self.ctx.cri;
        let id = cri
            .create_container(sandbox_id, config, sandbox_config)
            .await
            .map_err(|e| Waiting {
                reason: "CreateContainerError".into(),
                message: e.status.message().to_string(),
            })?;
        let events = &self.ctx.events;
        let name = &container.name;
        events.pod(
            pod,
            Some(name),
            Kind::Normal,
            "Created",
            format!("Created container {name}"),
        );
        cri.start_container(&id).await.map_err(|e| Waiting {
            reason: "RunContainerError".into(),
            message: e.status.message().to_string(),
        })?;
        events.pod(
            pod,
            Some(name),
            Kind::Normal,
            "Started",
            format!("Started container {name}"),
        );
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Cri(#[from] crate::cri::CriError),
    #[error("{0}")]
    Api(String),
}

fn find_container(pod: &Pod, name: &str, init: bool) -> Option<Container> {
    let list = if init {
        decide::init_containers(pod)
    } else {
        decide::regular_containers(pod)
    };
    list.iter().find(|c| c.name == name).cloned()
}

fn grace_seconds(pod: &Pod) -> i64 {
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

mod pull;
mod report;
mod sources;
mod teardown;

use pull::PullFailure;
use teardown::{pre_stop, termination_messages};

#[cfg(test)]
mod tests;
