//! The pod state machine: from the pod's spec and what the runtime holds, the state the pod is
//! in and the next actions (create a sandbox, start or kill a container), with back-off. Pure.
//!
//! Native sidecars (KEP-753, an init container with `restartPolicy: Always`) start in their
//! place among the init containers; the next one waits until the sidecar has started (running,
//! and its startup probe passed if it has one). They restart whenever they exit, whatever the
//! pod's policy, and are stopped once the regular containers are done.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};

pub use super::container_kind::ContainerKind;
use super::observed::{ObservedContainer, ObservedPod, RunState};
use crate::backoff;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        }
    }

    /// Whether a container that exited with `exit_code` is started again.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// Where a pod stands on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// No ready sandbox: a new one (this attempt) is created.
    NeedsSandbox { attempt: u32 },
    /// Init container `index` runs (or waits to be restarted).
    Initializing { index: usize },
    /// All init containers succeeded: regular containers run and are restarted per policy.
    Running,
    /// Every regular container exited and none will be restarted.
    Completed,
    /// An init container failed and the restart policy does not retry it.
    InitFailed,
}

/// The kill reason of a sidecar stopped because the main containers are done (not restarted).
pub const SIDECAR_DONE: &str = "sidecar stopped after the main containers";

/// Whether an init container is a native sidecar.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's native sidecars, in order.
pub fn sidecars(pod: &Pod) -> impl Iterator<Item = &Container> {
    init_containers(pod).iter().filter(|c| is_sidecar(c))
}

/// Whether a running container has started: its startup probe passed, or it has none.
pub fn has_started(
    spec: &Container,
    o: &ObservedContainer,
    started: &HashMap<String, bool>,
) -> bool {
    o.state == RunState::Running
        && started
            .get(&o.id)
            .copied()
            .unwrap_or(spec.startup_probe.is_none())
}

impl PodState {
    /// `started`: whether each running container's startup probe passed, by id.
    pub fn of(pod: &Pod, observed: &ObservedPod, started: &HashMap<String, bool>) -> Self {
        let policy = RestartPolicy::of(pod);
        let Some(sandbox) = observed.sandbox.as_ref() else {
            return PodState::NeedsSandbox { attempt: 0 };
        };
        if !sandbox.ready {
            // A finished pod's sandbox is stopped on purpose: it is not recreated.
            if regular_all_done(pod, observed, policy) {
                return PodState::Completed;
            }
            if policy == RestartPolicy::Never && init_failed(pod, observed) {
                return PodState::InitFailed;
            }
            return PodState::NeedsSandbox {
                attempt: sandbox.attempt + 1,
            };
        }
        for (index, c) in init_containers(pod).iter().enumerate() {
            if is_sidecar(c) {
                match observed.latest(&c.name) {
                    Some(o) if has_started(c, o, started) => continue,
                    // Once the regular containers run, a sidecar that exits is restarted beside
                    // them, not by initializing again.
                    Some(_) if regular_started(pod, observed) => continue,
                    _ => return PodState::Initializing { index },
                }
            }
            match observed.latest(&c.name) {
                Some(o) if o.state == RunState::Exited && o.exit_code == 0 => continue,
                Some(o) if o.state == RunState::Exited && policy == RestartPolicy::Never => {
                    return PodState::InitFailed;
                }
                _ => return PodState::Initializing { index },
            }
        }
        if regular_all_done(pod, observed, policy) {
            PodState::Completed
        } else {
            PodState::Running
        }
    }

    /// Whether regular containers may be started in this state.
    pub fn runs_regular_containers(&self) -> bool {
        matches!(self, PodState::Running)
    }

    /// Whether the pod holds no more running work.
    pub fn is_finished(&self) -> bool {
        matches!(self, PodState::Completed | PodState::InitFailed)
    }
}

fn regular_all_done(pod: &Pod, observed: &ObservedPod, policy: RestartPolicy) -> bool {
    let containers = regular_containers(pod);
    !containers.is_empty()
        && containers.iter().all(|c| match observed.latest(&c.name) {
            Some(o) => o.state == RunState::Exited && !policy.restarts(o.exit_code),
            None => false,
        })
}

/// Whether any regular container has been created in this sandbox (initialization is over).
fn regular_started(pod: &Pod, observed: &ObservedPod) -> bool {
    regular_containers(pod)
        .iter()
        .any(|c| observed.latest(&c.name).is_some())
}

fn init_failed(pod: &Pod, observed: &ObservedPod) -> bool {
    init_containers(pod)
        .iter()
        .filter(|c| !is_sidecar(c))
        .any(|c| {
            observed
                .latest(&c.name)
                .is_some_and(|o| o.state == RunState::Exited && o.exit_code != 0)
        })
}

pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
}

pub fn regular_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

/// The spec of the named init or regular container (an ephemeral one: `ephemeral_container`).
pub fn find_container<'a>(pod: &'a Pod, name: &str, kind: ContainerKind) -> Option<&'a Container> {
    let list = match kind {
        ContainerKind::Init => init_containers(pod),
        ContainerKind::Regular => regular_containers(pod),
        ContainerKind::Ephemeral => return None,
    };
    list.iter().find(|c| c.name == name)
}

/// The spec of the named container of any kind.
pub fn container_spec<'a>(
    pod: &'a Pod,
    name: &str,
    kind: ContainerKind,
) -> Option<Cow<'a, Container>> {
    match kind {
        ContainerKind::Ephemeral => ephemeral_container(pod, name).map(Cow::Owned),
        _ => find_container(pod, name, kind).map(Cow::Borrowed),
    }
}

/// The running container an ephemeral one targets (`targetContainerName`): Ok(None) without a
/// target, Err when the target is not running in this sandbox.
pub fn ephemeral_target<'a>(
    pod: &Pod,
    name: &str,
    observed: &'a ObservedPod,
) -> Result<Option<&'a str>, String> {
    let target = ephemeral_containers(pod)
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.target_container_name.as_deref());
    let Some(target) = target else {
        return Ok(None);
    };
    match observed.latest(target) {
        Some(o) if o.state == RunState::Running => Ok(Some(&o.id)),
        _ => Err(format!(
            "target container {target:?} (targetContainerName) is not running"
        )),
    }
}

pub fn ephemeral_containers(pod: &Pod) -> &[EphemeralContainer] {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or(&[])
}

/// The named ephemeral container as a Container (the same fields, without its target), so it
/// starts through the same path as the others.
pub fn ephemeral_container(pod: &Pod, name: &str) -> Option<Container> {
    let e = ephemeral_containers(pod).iter().find(|c| c.name == name)?;
    let mut fields = serde_json::to_value(e).ok()?;
    fields.as_object_mut()?.remove("targetContainerName");
    serde_json::from_value(fields).ok()
}

/// Ephemeral containers that never ran in this pod (in this sandbox or an older one): they
/// start in a running sandbox, during initialization too, as the kubelet starts them.
fn ephemeral_to_start<'a>(
    pod: &'a Pod,
    observed: &'a ObservedPod,
) -> impl Iterator<Item = &'a EphemeralContainer> {
    ephemeral_containers(pod).iter().filter(|c| {
        observed.latest(&c.name).is_none() && !observed.earlier_attempts.contains_key(&c.name)
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop and remove the old sandboxes (and their containers), then run a new one.
    CreateSandbox { attempt: u32 },
    /// Create and start this attempt of a container (pulling its image per policy first).
    StartContainer {
        name: String,
        kind: ContainerKind,
        attempt: u32,
    },
    /// Stop a running container (liveness failure): it is restarted per policy afterwards.
    KillContainer {
        id: String,
        name: String,
        reason: String,
    },
    /// Remove exited containers no longer needed for status or logs.
    RemoveContainers { ids: Vec<String> },
    /// Stop the sandbox of a pod whose work is done (releases its address; containers stay
    /// for status and logs).
    StopSandbox { id: String },
}

/// A container that waits: why, and for how long at most.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Containers held back (CrashLoopBackOff), by name.
    pub waiting: BTreeMap<String, Waiting>,
    /// When to sync again even if nothing changes (the end of the shortest back-off).
    pub wake_after: Option<Duration>,
}

impl Plan {
    fn wake(&mut self, after: Duration) {
        self.wake_after = Some(self.wake_after.map_or(after, |w| w.min(after)));
    }
}

/// Decides the next actions for a pod that is not being deleted. `unhealthy` lists container ids
/// whose liveness (or startup) probe failed.
pub fn plan(
    pod: &Pod,
    observed: &ObservedPod,
    probed: &Probed<'_>,
    now_ns: i64,
) -> (PodState, Plan) {
    let state = PodState::of(pod, observed, probed.started);
    let unhealthy = probed.unhealthy;
    let facts = Facts {
        pod,
        unhealthy,
        now_ns,
    };
    let mut plan = Plan::default();
    match &state {
        PodState::NeedsSandbox { attempt } => {
            plan.actions
                .push(Action::CreateSandbox { attempt: *attempt });
        }
        PodState::Initializing { index } => {
            // Init containers restart on failure unless the policy is Never (then InitFailed).
            // The index was taken from this pod's init containers, so it is always found.
            // Sidecars started before it are kept running (restarted, killed when unhealthy).
            for c in init_containers(pod)
                .iter()
                .take(*index)
                .filter(|c| is_sidecar(c))
            {
                decide_container(
                    &mut plan,
                    &facts,
                    &Slot::of(c, ContainerKind::Init, RestartPolicy::Always, observed),
                );
            }
            if let Some(container) = init_containers(pod).get(*index) {
                let policy = match is_sidecar(container) {
                    true => RestartPolicy::Always,
                    false => RestartPolicy::OnFailure,
                };
                let slot = Slot::of(container, ContainerKind::Init, policy, observed);
                decide_container(&mut plan, &facts, &slot);
            }
        }
        PodState::Running => {
            for c in sidecars(pod) {
                decide_container(
                    &mut plan,
                    &facts,
                    &Slot::of(c, ContainerKind::Init, RestartPolicy::Always, observed),
                );
            }
            let policy = RestartPolicy::of(pod);
            for c in regular_containers(pod) {
                decide_container(
                    &mut plan,
                    &facts,
                    &Slot::of(c, ContainerKind::Regular, policy, observed),
                );
            }
        }
        PodState::Completed | PodState::InitFailed
            if running_sidecars(pod, observed).next().is_some() =>
        {
            // The main work is done: the sidecars stop, the last one first; the sandbox after.
            for (c, o) in running_sidecars(pod, observed)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                plan.actions.push(
                    Slot::of(c, ContainerKind::Init, RestartPolicy::Always, observed)
                        .kill(o, SIDECAR_DONE),
                );
            }
        }
        PodState::Completed | PodState::InitFailed => {
            if let Some(sandbox) = observed.sandbox.as_ref().filter(|s| s.ready) {
                plan.actions.push(Action::StopSandbox {
                    id: sandbox.id.clone(),
                });
            }
        }
    }
    if matches!(state, PodState::Initializing { .. } | PodState::Running) {
        plan.actions.extend(
            ephemeral_to_start(pod, observed).map(|c| Action::StartContainer {
                name: c.name.clone(),
                kind: ContainerKind::Ephemeral,
                attempt: 0,
            }),
        );
    }
    let garbage = observed.garbage();
    let mut stale = observed.stale_containers.clone();
    stale.extend(garbage);
    if !stale.is_empty() {
        plan.actions.push(Action::RemoveContainers { ids: stale });
    }
    (state, plan)
}

/// What the probes say, for the plan: containers whose liveness (or startup) probe failed, and
/// whether each running container's startup probe passed, by id.
#[derive(Clone, Copy)]
pub struct Probed<'a> {
    pub unhealthy: &'a [String],
    pub started: &'a HashMap<String, bool>,
}

fn running_sidecars<'a>(
    pod: &'a Pod,
    observed: &'a ObservedPod,
) -> impl Iterator<Item = (&'a Container, &'a ObservedContainer)> {
    sidecars(pod).filter_map(|c| {
        let o = observed.latest(&c.name)?;
        (o.state == RunState::Running).then_some((c, o))
    })
}

/// What a plan is decided from, besides the runtime view: the pod, the containers whose
/// liveness (or startup) probe failed, and the time.
struct Facts<'a> {
    pod: &'a Pod,
    unhealthy: &'a [String],
    now_ns: i64,
}

/// One container of the pod as the state machine sees it: its spec, whether it is an init
/// container, the restart policy that applies to it, and its newest attempt in the runtime.
struct Slot<'a> {
    spec: &'a Container,
    kind: ContainerKind,
    policy: RestartPolicy,
    latest: Option<&'a ObservedContainer>,
    /// The attempt of its first start in this sandbox.
    first_attempt: u32,
}

impl<'a> Slot<'a> {
    fn of(
        spec: &'a Container,
        kind: ContainerKind,
        policy: RestartPolicy,
        observed: &'a ObservedPod,
    ) -> Self {
        Slot {
            spec,
            kind,
            policy,
            latest: observed.latest(&spec.name),
            first_attempt: observed.first_attempt(&spec.name),
        }
    }

    fn start(&self, attempt: u32) -> Action {
        Action::StartContainer {
            name: self.spec.name.clone(),
            kind: self.kind,
            attempt,
        }
    }

    fn kill(&self, latest: &ObservedContainer, reason: &str) -> Action {
        Action::KillContainer {
            id: latest.id.clone(),
            name: self.spec.name.clone(),
            reason: reason.into(),
        }
    }
}

fn changed(spec: &Container, observed: &ObservedContainer) -> bool {
    !observed.spec_hash.is_empty()
        && observed.spec_hash != crate::pod::translate::container_hash(spec)
}

fn decide_container(plan: &mut Plan, facts: &Facts<'_>, slot: &Slot<'_>) {
    let Some(latest) = slot.latest else {
        plan.actions.push(slot.start(slot.first_attempt));
        return;
    };
    match latest.state {
        RunState::Running => {
            if facts.unhealthy.contains(&latest.id) {
                plan.actions
                    .push(slot.kill(latest, "failed liveness probe"));
            } else if changed(slot.spec, latest) {
                plan.actions.push(slot.kill(latest, "definition changed"));
            }
        }
        // Created but never started: the agent died in between. It never ran, so the next attempt
        // starts at once whatever the policy.
        RunState::Created => plan.actions.push(slot.start(latest.attempt + 1)),
        RunState::Unknown | RunState::Exited => decide_exited(plan, facts, slot, latest),
    }
}

/// A container that is no longer running: started again at once, after its back-off, or never.
fn decide_exited(plan: &mut Plan, facts: &Facts<'_>, slot: &Slot<'_>, latest: &ObservedContainer) {
    let exit_code = if latest.state == RunState::Exited {
        latest.exit_code
    } else {
        1
    };
    // A container stopped because its definition changed comes back at once.
    if changed(slot.spec, latest) && slot.policy == RestartPolicy::Always {
        plan.actions.push(slot.start(latest.attempt + 1));
        return;
    }
    if !slot.policy.restarts(exit_code) {
        return;
    }
    let (delay, ready_at) = restart_at(latest);
    if facts.now_ns >= ready_at {
        plan.actions.push(slot.start(latest.attempt + 1));
    } else {
        plan.waiting.insert(
            slot.spec.name.clone(),
            crash_loop_back_off(facts.pod, &slot.spec.name, delay),
        );
        plan.wake(Duration::from_nanos(
            u64::try_from(ready_at - facts.now_ns).unwrap_or(0),
        ));
    }
}

/// The back-off before the next attempt, and the time (ns) it ends.
fn restart_at(latest: &ObservedContainer) -> (Duration, i64) {
    // The kubelet forgets the back-off of a container that ran well for ten minutes.
    let ran_ns = latest.finished_at_ns.saturating_sub(latest.started_at_ns);
    let delay = if latest.started_at_ns > 0 && ran_ns >= 600 * 1_000_000_000 {
        Duration::ZERO
    } else {
        backoff::restart_delay(latest.attempt)
    };
    let finished = if latest.finished_at_ns > 0 {
        latest.finished_at_ns
    } else {
        latest.created_at_ns
    };
    let ready_at = finished.saturating_add(i64::try_from(delay.as_nanos()).unwrap_or(i64::MAX));
    (delay, ready_at)
}

fn crash_loop_back_off(pod: &Pod, container: &str, delay: Duration) -> Waiting {
    Waiting {
        reason: "CrashLoopBackOff".into(),
        message: format!(
            "back-off {}s restarting failed container={container} pod={}",
            delay.as_secs(),
            super::format_pod(pod)
        ),
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
