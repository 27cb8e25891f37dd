//! Act: one planned action against the runtime. Input: the action and the scene it was planned
//! from; output: an `Outcome` (whether the runtime changed, containers held back or released,
//! when to retry). What acting remembers between syncs is here too: image pull failures, and the
//! containers being stopped in the background.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use super::phases::{Phase, StartClock};
use super::pod_key;
use super::pull::ImagePulls;
use super::start::{self, ContainerToStart};
use super::stop::{self, Stop};
use super::SyncError;
use crate::pod::admit;
use crate::pod::context::Context;
use crate::pod::decide::{self, Action, ContainerKind, Waiting};
use crate::pod::events::Kind;
use crate::pod::observed::ObservedPod;
use crate::pod::translate;

/// How long a failed sandbox creation waits before the next try.
const SANDBOX_RETRY: Duration = Duration::from_secs(3);
/// How long a container that could not start waits, unless an image pull back-off ends sooner.
const START_RETRY: Duration = Duration::from_secs(5);

/// What an action was planned from.
pub struct Scene<'a> {
    pub pod: &'a Pod,
    pub observed: &'a ObservedPod,
    /// The latest liveness probe failure by container id (for the Unhealthy event of a kill).
    pub liveness_failures: HashMap<String, String>,
}

/// What one action did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The runtime changed: worth observing and planning again in this sync.
    pub progressed: bool,
    /// Containers now held back (`Some`), or released after they started (`None`), by name.
    pub held: BTreeMap<String, Option<Waiting>>,
    /// Sync again after this long at the latest.
    pub retry_after: Option<Duration>,
}

impl Outcome {
    fn progressed() -> Self {
        Outcome {
            progressed: true,
            ..Default::default()
        }
    }
}

pub struct Actor {
    pulls: ImagePulls,
    /// Containers being stopped in the background (liveness failures), so a slow stop within
    /// the grace period does not hold up status updates.
    killing: Arc<Mutex<HashSet<String>>>,
    /// Wakes the worker when a background stop ends.
    poke: mpsc::Sender<()>,
}

impl Actor {
    pub fn new(poke: mpsc::Sender<()>) -> Self {
        Actor {
            pulls: ImagePulls::default(),
            killing: Arc::default(),
            poke,
        }
    }

    pub async fn act(
        &mut self,
        ctx: &Context,
        scene: &Scene<'_>,
        action: Action,
        clock: &mut StartClock,
    ) -> Result<Outcome, SyncError> {
        match action {
            Action::CreateSandbox { attempt } => create_sandbox(ctx, scene, attempt, clock).await,
            Action::StartContainer {
                name,
                kind,
                attempt,
            } => Ok(self
                .start_container(ctx, scene, name, kind, attempt, clock)
                .await),
            Action::KillContainer { id, name, reason } => {
                self.kill_container(ctx, scene, id, &name, &reason);
                Ok(Outcome::default())
            }
            Action::StopSandbox { id } => {
                ctx.cri.stop_pod_sandbox(&id).await?;
                Ok(Outcome::progressed())
            }
            Action::RemoveContainers { ids } => {
                for id in ids {
                    if let Err(e) = ctx.cri.remove_container(&id).await {
                        tracing::debug!(container = %id, error = %e, "remove failed");
                    }
                }
                Ok(Outcome::default())
            }
        }
    }

    async fn start_container(
        &mut self,
        ctx: &Context,
        scene: &Scene<'_>,
        name: String,
        kind: ContainerKind,
        attempt: u32,
        clock: &mut StartClock,
    ) -> Outcome {
        let pod = scene.pod;
        let (Some(container), Some(sandbox)) = (
            decide::container_spec(pod, &name, kind),
            scene.observed.sandbox.as_ref(),
        ) else {
            return Outcome::default();
        };
        let admitted = match kind {
            ContainerKind::Ephemeral => admit::admit_ephemeral(&ctx.settings.security, &container),
            _ => Ok(()),
        };
        let target = admitted.and_then(|()| decide::ephemeral_target(pod, &name, scene.observed));
        let started = match target {
            Ok(target_id) => {
                let start = ContainerToStart {
                    pod,
                    sandbox,
                    container: &container,
                    kind,
                    target_id,
                    attempt,
                };
                start::container(ctx, &mut self.pulls, &start, clock).await
            }
            Err(message) => Err(Waiting {
                reason: "CreateContainerConfigError".into(),
                message,
            }),
        };
        match started {
            Ok(()) => Outcome {
                held: BTreeMap::from([(name, None)]),
                ..Outcome::progressed()
            },
            Err(w) => {
                tracing::info!(pod = %pod_key(pod), container = %name, reason = %w.reason, message = %w.message, "container not started");
                Outcome {
                    progressed: false,
                    held: BTreeMap::from([(name, Some(w))]),
                    retry_after: Some(self.pulls.retry_in().unwrap_or(START_RETRY)),
                }
            }
        }
    }

    /// Stops the container in the background (preStop, then within the grace period); it is
    /// restarted per policy once it has exited.
    fn kill_container(
        &self,
        ctx: &Context,
        scene: &Scene<'_>,
        id: String,
        name: &str,
        reason: &str,
    ) {
        let fresh = self
            .killing
            .lock()
            .map(|mut k| k.insert(id.clone()))
            .unwrap_or(false);
        if !fresh {
            return;
        }
        let pod = scene.pod;
        tracing::info!(pod = %pod_key(pod), container = %name, %reason, "killing container");
        if let Some(why) = scene.liveness_failures.get(&id) {
            let message = format!("Liveness probe failed: {why}");
            ctx.events
                .pod(pod, Some(name), Kind::Warning, "Unhealthy", message);
        }
        let message = match reason {
            decide::SIDECAR_DONE => format!("Stopping container {name}"),
            _ => format!("Container {name} {reason}, will be restarted"),
        };
        ctx.events
            .pod(pod, Some(name), Kind::Normal, "Killing", message);
        let grace = stop::grace_seconds(pod);
        let spec = decide::find_container(pod, name, ContainerKind::Regular)
            .or_else(|| decide::find_container(pod, name, ContainerKind::Init))
            .cloned();
        let ip = scene.observed.pod_ip();
        let (cri, killing, poke) = (ctx.cri.clone(), self.killing.clone(), self.poke.clone());
        let (events, pod) = (ctx.events.clone(), pod.clone());
        tokio::spawn(async move {
            let target = Stop {
                spec: spec.as_ref(),
                id: &id,
                pod_ip: &ip,
                grace,
                report: Some((&events, &pod)),
            };
            if let Err(e) = stop::container(cri.as_ref(), target).await {
                tracing::warn!(container = %id, error = %e, "stopping container failed");
            }
            if let Ok(mut k) = killing.lock() {
                k.remove(&id);
            }
            let _ = poke.try_send(());
        });
    }
}

/// Removes the pod's old sandboxes, then runs a new one that records their containers' attempts. A failure holds every container back
/// as ContainerCreating with the runtime's message.
async fn create_sandbox(
    ctx: &Context,
    scene: &Scene<'_>,
    attempt: u32,
    clock: &mut StartClock,
) -> Result<Outcome, SyncError> {
    let (pod, cri) = (scene.pod, &ctx.cri);
    let volumes = clock.time(Phase::Volumes, super::mounts::ready(ctx, pod));
    if let Err(message) = volumes.await {
        tracing::info!(pod = %pod_key(pod), %message, "volumes not ready; the pod waits");
        ctx.events
            .pod(pod, None, Kind::Warning, "FailedMount", message.clone());
        return Ok(hold_all(pod, message));
    }
    for id in &scene.observed.all_sandbox_ids {
        cri.stop_pod_sandbox(id).await?;
        cri.remove_pod_sandbox(id).await?;
    }
    // The pod's cgroup with its limits comes first, as the kubelet's pod container manager
    // makes it: a pod is not started unbounded.
    let pods = ctx.all_pods();
    if let Err(e) = ctx.cgroups.ensure_pod(pod, pods.iter().map(|p| p.as_ref())) {
        let message = format!("unable to ensure pod container exists: {e}");
        tracing::warn!(pod = %pod_key(pod), %message, "pod cgroup not created");
        ctx.events.pod(
            pod,
            None,
            Kind::Warning,
            "FailedCreatePodContainer",
            message.clone(),
        );
        return Ok(hold_all(pod, message));
    }
    let mut config = translate::sandbox_config(&ctx.settings, pod, attempt);
    // The old sandboxes went with their containers: the new one carries their attempts.
    let earlier = scene.observed.attempts_so_far();
    if !earlier.is_empty() {
        config
            .annotations
            .insert(crate::cri::labels::EARLIER_ATTEMPTS.into(), earlier);
    }
    let _ = std::fs::create_dir_all(&config.log_directory);
    let Err(e) = clock
        .time(Phase::Sandbox, cri.run_pod_sandbox(config))
        .await
    else {
        return Ok(Outcome::progressed());
    };
    tracing::warn!(pod = %pod_key(pod), error = %e, "sandbox creation failed");
    let message = format!("Failed to create pod sandbox: {e}");
    ctx.events
        .pod(pod, None, Kind::Warning, "FailedCreatePodSandBox", message);
    Ok(hold_all(pod, e.to_string()))
}

/// Every container held back as ContainerCreating with `message`, tried again soon.
fn hold_all(pod: &Pod, message: String) -> Outcome {
    let creating = Waiting {
        reason: "ContainerCreating".into(),
        message,
    };
    let held = decide::regular_containers(pod)
        .iter()
        .chain(decide::init_containers(pod))
        .map(|c| (c.name.clone(), Some(creating.clone())))
        .collect();
    Outcome {
        progressed: false,
        held,
        retry_after: Some(SANDBOX_RETRY),
    }
}
