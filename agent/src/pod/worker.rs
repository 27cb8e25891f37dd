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

struct PullFailure {
    count: u32,
    at: Instant,
    message: String,
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

    /// Pulls the image per imagePullPolicy, with ErrImagePull then ImagePullBackOff on failure.
    async fn ensure_image(
        &mut self,
        pod: &Pod,
        container: &Container,
        sandbox: &cri::PodSandboxConfig,
    ) -> Result<String, Waiting> {
        let image = container.image.clone().unwrap_or_default();
        let policy = container
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| default_pull_policy(&image).to_string());
        let cri = &self.ctx.cri;
        if policy != "Always" {
            if let Ok(Some(present)) = cri.image_status(&image).await {
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Normal,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                );
                return Ok(present.id);
            }
            if policy == "Never" {
                return Err(Waiting {
                    reason: "ErrImageNeverPull".into(),
                    message: format!(
                        "Container image \"{image}\" is not present with pull policy of Never"
                    ),
                });
            }
        }
        if let Some(f) = self.pulls.get(&image) {
            if f.at.elapsed() < backoff::pull_delay(f.count) {
                return Err(Waiting {
                    reason: "ImagePullBackOff".into(),
                    message: format!("Back-off pulling image \"{image}\": {}", f.message),
                });
            }
        }
        self.ctx.events.pod(
            pod,
            Some(&container.name),
            Kind::Normal,
            "Pulling",
            format!("Pulling image \"{image}\""),
        );
        let started = Instant::now();
        match cri.pull_image(&image, Some(sandbox.clone())).await {
            Ok(image_ref) => {
                self.pulls.remove(&image);
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{image}\" in {:.3}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
                Ok(image_ref)
            }
            Err(e) => {
                let message = format!("Failed to pull image \"{image}\": {}", e.status.message());
                tracing::info!(pod = %pod_key(pod), %message, "image pull failed");
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Warning,
                    "Failed",
                    message.clone(),
                );
                let entry = self.pulls.entry(image).or_insert(PullFailure {
                    count: 0,
                    at: Instant::now(),
                    message: String::new(),
                });
                entry.count += 1;
                entry.at = Instant::now();
                entry.message = message.clone();
                Err(Waiting {
                    reason: "ErrImagePull".into(),
                    message,
                })
            }
        }
    }

    fn pull_retry_in(&self) -> Option<Duration> {
        self.pulls
            .values()
            .map(|f| backoff::pull_delay(f.count).saturating_sub(f.at.elapsed()))
            .min()
    }

    async fn fetch_sources(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<(env::Sources, volumes::Objects), String> {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let (mut cms, mut secrets) = env::referenced(container);
        let (vcms, vsecrets) = volumes::referenced(pod);
        cms.extend(vcms);
        secrets.extend(vsecrets);
        cms.sort();
        cms.dedup();
        secrets.sort();
        secrets.dedup();
        let mut env_sources = env::Sources::default();
        let mut objects = volumes::Objects::default();
        let cm_api: Api<ConfigMap> = Api::namespaced(self.ctx.client.clone(), &ns);
        for name in cms {
            if let Some(cm) = cm_api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading configmap {ns}/{name}: {e}"))?
            {
                let mut bytes: BTreeMap<String, Vec<u8>> = cm
                    .data
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                bytes.extend(
                    cm.binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0)),
                );
                env_sources
                    .config_maps
                    .insert(name.clone(), cm.data.unwrap_or_default());
                objects.config_maps.insert(name, bytes);
            }
        }
        let secret_api: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &ns);
        for name in secrets {
            if let Some(s) = secret_api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading secret {ns}/{name}: {e}"))?
            {
                let mut bytes: BTreeMap<String, Vec<u8>> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                bytes.extend(
                    s.string_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes())),
                );
                env_sources.secrets.insert(
                    name.clone(),
                    bytes
                        .iter()
                        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                        .collect(),
                );
                objects.secrets.insert(name, bytes);
            }
        }
        Ok((env_sources, objects))
    }

    /// After an agent restart, readiness is taken from the status the API holds for the same
    /// container, so adopted pods do not flap to unready while probes warm up.
    fn seed_probes(&mut self, pod: &Pod, observed: &ObservedPod) {
        if self.seeded {
            return;
        }
        self.seeded = true;
        let Ok(mut table) = self.probes.lock() else {
            return;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        for s in statuses {
            let Some(id) = s
                .container_id
                .as_deref()
                .and_then(|i| i.strip_prefix("containerd://"))
            else {
                continue;
            };
            if observed
                .containers
                .iter()
                .any(|c| c.id == id && c.state == RunState::Running)
            {
                table.view.ready.insert(id.to_string(), s.ready);
                if s.started == Some(true) {
                    table.view.started.insert(id.to_string(), true);
                }
            }
        }
    }

    fn manage_probes(&mut self, pod: &Pod, observed: &ObservedPod) {
        let ip = observed
            .sandbox
            .as_ref()
            .and_then(|s| s.ip.clone())
            .unwrap_or_default();
        let mut running = Vec::new();
        for c in decide::regular_containers(pod) {
            if let Some(o) = observed
                .latest(&c.name)
                .filter(|o| o.state == RunState::Running)
            {
                running.push(o.id.clone());
                if c.startup_probe.is_some()
                    || c.liveness_probe.is_some()
                    || c.readiness_probe.is_some()
                {
                    self.probers
                        .ensure(c, &o.id, &ip, &self.ctx.cri, &self.probes, &self.poke_tx);
                }
            }
        }
        self.probers.retain(&running, &self.probes);
    }

    /// Events for waiting containers (BackOff, Failed) and readiness failures, once per change.
    fn announce(&mut self, pod: &Pod, observed: &ObservedPod, waiting: &BTreeMap<String, Waiting>) {
        for (name, w) in waiting {
            let key = format!("{}|{}", w.reason, w.message);
            if self.announced_waiting.get(name) == Some(&key) {
                continue;
            }
            self.announced_waiting.insert(name.clone(), key);
            let (kind, reason, message) = match w.reason.as_str() {
                "CrashLoopBackOff" => (
                    Kind::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {name} in pod {}",
                        pod_key(pod)
                    ),
                ),
                "ImagePullBackOff" => (Kind::Normal, "BackOff", w.message.clone()),
                "ContainerCreating" | "PodInitializing" => continue,
                other => (
                    Kind::Warning,
                    "Failed",
                    format!("Error: {other}: {}", w.message),
                ),
            };
            self.ctx.events.pod(pod, Some(name), kind, reason, message);
        }
        self.announced_waiting
            .retain(|name, _| waiting.contains_key(name));
        let Ok(table) = self.probes.lock() else {
            return;
        };
        for c in observed
            .containers
            .iter()
            .filter(|c| c.state == RunState::Running)
        {
            let unready = table.view.ready.get(&c.id) == Some(&false);
            if unready && self.announced_unready.insert(c.id.clone()) {
                if let Some(why) = table.last_failure.get(&(c.id.clone(), "Readiness")) {
                    self.ctx.events.pod(
                        pod,
                        Some(&c.name),
                        Kind::Warning,
                        "Unhealthy",
                        format!("Readiness probe failed: {why}"),
                    );
                }
            } else if !unready {
                self.announced_unready.remove(&c.id);
            }
        }
    }

    fn record_start(&mut self, pod: &Pod, status: &PodStatus) {
        if self.start_recorded {
            return;
        }
        let all_running = status.container_statuses.as_ref().is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
        if all_running {
            self.start_recorded = true;
            // Pods adopted after a restart were started long ago: only fresh starts count.
            if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
                if let Some(created) = &pod.metadata.creation_timestamp {
                    let secs = Timestamp::now().duration_since(created.0).as_secs_f64();
                    self.ctx.metrics.observe_pod_start(secs.max(0.0));
                }
            }
        }
    }

    async fn write_status(&mut self, pod: &Pod, status: PodStatus) -> Result<(), SyncError> {
        if pod.status.as_ref() == Some(&status) || self.last_written.as_ref() == Some(&status) {
            return Ok(());
        }
        let api: Api<Pod> = Api::namespaced(
            self.ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({ "status": status });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.last_written = Some(status);
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(SyncError::Api(format!(
                "writing status of pod {}: {e}",
                pod_key(pod)
            ))),
        }
    }

    /// Stops every container (preStop first, within the grace period), stops and removes the
    /// sandboxes (CNI DEL releases the address), removes the pod's volumes and logs, then deletes
    /// the API object with grace 0 so `kubectl delete` returns.
    async fn teardown(&mut self, pod: Option<&Pod>, why: Teardown) -> Result<(), SyncError> {
        self.probers.stop_all();
        let observed = self.observe().await?;
        let grace = pod.map_or(2, grace_seconds);
        let cri = self.ctx.cri.clone();
        let mut stops = Vec::new();
        for c in observed
            .containers
            .iter()
            .filter(|c| c.state == RunState::Running)
        {
            let spec = pod.and_then(|p| find_container(p, &c.name, c.init));
            if let Some(p) = pod {
                let msg = format!("Stopping container {}", c.name);
                self.ctx
                    .events
                    .pod(p, Some(&c.name), Kind::Normal, "Killing", msg);
            }
            let id = c.id.clone();
            let cri = cri.clone();
            let ip = observed
                .sandbox
                .as_ref()
                .and_then(|s| s.ip.clone())
                .unwrap_or_default();
            stops.push(async move {
                if let Some(spec) = spec {
                    pre_stop(cri.as_ref(), &spec, &id, &ip, grace).await;
                }
                cri.stop_container(&id, grace).await
            });
        }
        for result in futures::future::join_all(stops).await {
            if let Err(e) = result {
                if !e.is_not_found() {
                    return Err(e.into());
                }
            }
        }
        for id in &observed.all_sandbox_ids {
            cri.stop_pod_sandbox(id).await?;
            cri.remove_pod_sandbox(id).await?;
        }
        if let Some(p) = pod {
            let _ = std::fs::remove_dir_all(volumes::pod_dir(&self.ctx.root, p));
            let _ = std::fs::remove_dir_all(translate::pod_log_dir(&self.ctx.settings, p));
        } else {
            let _ = std::fs::remove_dir_all(self.ctx.root.join("pods").join(&self.uid));
        }
        if let (Some(p), Teardown::Deleted) = (pod, why) {
            let api: Api<Pod> = Api::namespaced(
                self.ctx.client.clone(),
                p.metadata.namespace.as_deref().unwrap_or("default"),
            );
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: p.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api
                .delete(p.metadata.name.as_deref().unwrap_or(""), &params)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(SyncError::Api(format!("deleting pod {}: {e}", pod_key(p)))),
            }
            tracing::info!(pod = %pod_key(p), "pod terminated and deleted");
        } else {
            tracing::info!(pod = %self.uid, "pod no longer in the API: removed from the runtime");
        }
        Ok(())
    }
}

/// The message of exited containers: what they wrote to their terminationMessagePath, or with
/// terminationMessagePolicy FallbackToLogsOnError and a failure, the end of their log.
fn termination_messages(root: &std::path::Path, pod: &Pod, observed: &mut ObservedPod) {
    const MAX: usize = 4096;
    for c in observed
        .containers
        .iter_mut()
        .filter(|c| c.state == RunState::Exited && c.message.is_empty())
    {
        let file = volumes::termination_log(root, pod, &c.name, c.attempt);
        let mut text = std::fs::read(&file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let spec = find_container(pod, &c.name, c.init);
        let fallback = spec.and_then(|s| s.termination_message_policy).as_deref()
            == Some("FallbackToLogsOnError");
        if text.is_empty() && fallback && c.exit_code != 0 {
            let log = std::fs::read_to_string(&c.log_path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = crate::server::logs::tail(&lines, 80);
            text = crate::server::logs::render(&tail, false);
            if text.len() > 2048 {
                let cut = text.len() - 2048;
                let start = (cut..text.len())
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(text.len());
                text = text[start..].to_string();
            }
        }
        if text.len() > MAX {
            let end = (0..=MAX)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            text.truncate(end);
        }
        c.message = text;
    }
}

/// preStop hook (exec, httpGet, tcpSocket or sleep), bounded by the grace period.
async fn pre_stop(
    cri: &dyn crate::cri::Cri,
    container: &Container,
    id: &str,
    pod_ip: &str,
    grace: i64,
) {
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
    let probe = k8s_openapi::api::core::v1::Probe {
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
    .await;
    tracing::info!(container = %container.name, ?result, "preStop hook ran");
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

fn default_pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        "IfNotPresent"
    } else {
        match last.split_once(':') {
            None => "Always",
            Some((_, "latest")) => "Always",
            Some(_) => "IfNotPresent",
        }
    }
}

fn now_ns() -> i64 {
    i64::try_from(Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod worker_tests;

#[cfg(test)]
mod tests {
    use super::default_pull_policy;

    #[test]
    fn pull_policy_defaults_like_the_api() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox"),
            "Always"
        );
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox:1.35"),
            "IfNotPresent"
        );
        assert_eq!(default_pull_policy("x@sha256:abc"), "IfNotPresent");
    }
}
