//! The pod state machine: from the pod's spec and what the runtime holds, the state the pod is
//! in and the next actions (create a sandbox, start or kill a container), with back-off. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

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

impl PodState {
    pub fn of(pod: &Pod, observed: &ObservedPod) -> Self {
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

fn init_failed(pod: &Pod, observed: &ObservedPod) -> bool {
    init_containers(pod).iter().any(|c| {
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

/// The spec of the named init (or regular) container.
pub fn find_container<'a>(pod: &'a Pod, name: &str, init: bool) -> Option<&'a Container> {
    let list = if init {
        init_containers(pod)
    } else {
        regular_containers(pod)
    };
    list.iter().find(|c| c.name == name)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop and remove the old sandboxes (and their containers), then run a new one.
    CreateSandbox { attempt: u32 },
    /// Create and start this attempt of a container (pulling its image per policy first).
    StartContainer {
        name: String,
        init: bool,
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
    unhealthy: &[String],
    now_ns: i64,
) -> (PodState, Plan) {
    let state = PodState::of(pod, observed);
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
            if let Some(container) = init_containers(pod).get(*index) {
                let slot = Slot::of(container, true, RestartPolicy::OnFailure, observed);
                decide_container(&mut plan, &facts, &slot);
            }
        }
        PodState::Running => {
            let policy = RestartPolicy::of(pod);
            for c in regular_containers(pod) {
                decide_container(&mut plan, &facts, &Slot::of(c, false, policy, observed));
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
    let garbage = observed.garbage();
    let mut stale = observed.stale_containers.clone();
    stale.extend(garbage);
    if !stale.is_empty() {
        plan.actions.push(Action::RemoveContainers { ids: stale });
    }
    (state, plan)
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
    init: bool,
    policy: RestartPolicy,
    latest: Option<&'a ObservedContainer>,
    /// The attempt of its first start in this sandbox.
    first_attempt: u32,
}

impl<'a> Slot<'a> {
    fn of(
        spec: &'a Container,
        init: bool,
        policy: RestartPolicy,
        observed: &'a ObservedPod,
    ) -> Self {
        Slot {
            spec,
            init,
            policy,
            latest: observed.latest(&spec.name),
            first_attempt: observed.first_attempt(&spec.name),
        }
    }

    fn start(&self, attempt: u32) -> Action {
        Action::StartContainer {
            name: self.spec.name.clone(),
            init: self.init,
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
    let meta = &pod.metadata;
    Waiting {
        reason: "CrashLoopBackOff".into(),
        message: format!(
            "back-off {}s restarting failed container={container} pod={}_{}({})",
            delay.as_secs(),
            meta.name.as_deref().unwrap_or_default(),
            meta.namespace.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::observed::ObservedSandbox;
    use k8s_openapi::api::core::v1::PodSpec;

    const SEC: i64 = 1_000_000_000;

    fn pod(policy: &str, init: &[&str], regular: &[&str]) -> Pod {
        let container = |n: &&str| Container {
            name: n.to_string(),
            image: Some("img".into()),
            ..Default::default()
        };
        Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                init_containers: if init.is_empty() {
                    None
                } else {
                    Some(init.iter().map(container).collect())
                },
                containers: regular.iter().map(container).collect(),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// A runtime view with one sandbox ("sb", ready or not) holding `containers`.
    fn in_sandbox(ready: bool, containers: Vec<ObservedContainer>) -> ObservedPod {
        ObservedPod {
            sandbox: Some(ObservedSandbox {
                id: "sb".into(),
                ready,
                ip: Some("10.0.0.2".into()),
                attempt: 0,
                created_at_ns: 1,
            }),
            containers,
            ..Default::default()
        }
    }

    fn container(
        name: &str,
        attempt: u32,
        state: RunState,
        exit_code: i32,
        finished_s: i64,
    ) -> ObservedContainer {
        ObservedContainer {
            id: format!("{name}-{attempt}"),
            sandbox_id: "sb".into(),
            name: name.into(),
            init: false,
            attempt,
            state,
            created_at_ns: 1,
            started_at_ns: 2,
            finished_at_ns: finished_s * SEC,
            exit_code,
            reason: String::new(),
            message: String::new(),
            image: "img".into(),
            image_ref: "sha256:x".into(),
            spec_hash: String::new(),
            log_path: String::new(),
        }
    }

    /// The plan's only action: start this attempt of a container.
    fn start(name: &str, init: bool, attempt: u32) -> Vec<Action> {
        vec![Action::StartContainer {
            name: name.into(),
            init,
            attempt,
        }]
    }

    #[test]
    fn new_pod_gets_a_sandbox_then_its_init_containers_in_order() {
        let p = pod("Always", &["i1", "i2"], &["app"]);
        let (state, plan) = plan(&p, &ObservedPod::default(), &[], 0);
        assert_eq!(state, PodState::NeedsSandbox { attempt: 0 });
        assert_eq!(plan.actions, vec![Action::CreateSandbox { attempt: 0 }]);

        let mut observed = in_sandbox(true, vec![]);
        let (state, plan1) = super::plan(&p, &observed, &[], 0);
        assert_eq!(state, PodState::Initializing { index: 0 });
        assert_eq!(plan1.actions, start("i1", true, 0));

        observed
            .containers
            .push(container("i1", 0, RunState::Exited, 0, 1));
        let (state, plan2) = super::plan(&p, &observed, &[], 2 * SEC);
        assert_eq!(state, PodState::Initializing { index: 1 });
        assert_eq!(plan2.actions, start("i2", true, 0));

        observed
            .containers
            .push(container("i2", 0, RunState::Exited, 0, 1));
        let (state, plan3) = super::plan(&p, &observed, &[], 2 * SEC);
        assert_eq!(state, PodState::Running);
        assert_eq!(plan3.actions, start("app", false, 0));
    }

    #[test]
    fn crashing_container_restarts_at_once_then_with_growing_back_off() {
        let p = pod("Always", &[], &["app"]);
        let mut observed = in_sandbox(true, vec![container("app", 0, RunState::Exited, 1, 100)]);
        let (_, first) = plan(&p, &observed, &[], 100 * SEC);
        assert_eq!(first.actions, start("app", false, 1));

        observed
            .containers
            .push(container("app", 1, RunState::Exited, 1, 101));
        let (_, held) = plan(&p, &observed, &[], 105 * SEC);
        assert!(held.actions.is_empty(), "{:?}", held.actions);
        assert_eq!(held.waiting["app"].reason, "CrashLoopBackOff");
        assert!(
            held.waiting["app"].message.starts_with("back-off 10s"),
            "{}",
            held.waiting["app"].message
        );
        assert_eq!(held.wake_after, Some(Duration::from_secs(6)));
        let (_, after) = plan(&p, &observed, &[], 111 * SEC);
        assert_eq!(after.actions, start("app", false, 2));

        observed
            .containers
            .push(container("app", 2, RunState::Exited, 1, 120));
        let (_, held) = plan(&p, &observed, &[], 121 * SEC);
        assert!(held.waiting["app"].message.starts_with("back-off 20s"));
        // The oldest dead attempt is removed; the previous one stays for `logs --previous`.
        assert_eq!(
            held.actions,
            vec![Action::RemoveContainers {
                ids: vec!["app-0".into()]
            }]
        );
    }

    #[test]
    fn restart_policy_decides_completion() {
        for (policy, exit, done) in [
            ("Never", 1, true),
            ("OnFailure", 0, true),
            ("OnFailure", 1, false),
            ("Always", 0, false),
        ] {
            let p = pod(policy, &[], &["app"]);
            let observed = in_sandbox(true, vec![container("app", 0, RunState::Exited, exit, 1)]);
            let (state, plan) = plan(&p, &observed, &[], 2 * SEC);
            assert_eq!(state == PodState::Completed, done, "{policy} exit {exit}");
            let stops = plan.actions == vec![Action::StopSandbox { id: "sb".into() }];
            assert_eq!(stops, done, "{policy} exit {exit}: {:?}", plan.actions);
        }
    }

    #[test]
    fn failed_liveness_kills_the_running_container() {
        let p = pod("Always", &[], &["app"]);
        let observed = in_sandbox(true, vec![container("app", 0, RunState::Running, 0, 0)]);
        let (_, plan) = plan(&p, &observed, &["app-0".to_string()], SEC);
        assert!(matches!(&plan.actions[0], Action::KillContainer { id, .. } if id == "app-0"));
    }

    #[test]
    fn changed_definition_restarts_the_container_at_once() {
        let p = pod("Always", &[], &["app"]);
        let spec = &p.spec.as_ref().unwrap().containers[0];
        let mut running = container("app", 0, RunState::Running, 0, 0);
        running.spec_hash = crate::pod::translate::container_hash(spec);
        let mut observed = in_sandbox(true, vec![running.clone()]);
        let (_, same) = plan(&p, &observed, &[], SEC);
        assert!(same.actions.is_empty(), "{:?}", same.actions);

        running.spec_hash = "0000".into();
        observed.containers[0] = running.clone();
        let (_, kill) = plan(&p, &observed, &[], SEC);
        assert!(
            matches!(&kill.actions[0], Action::KillContainer { reason, .. } if reason == "definition changed")
        );

        let mut exited = running;
        exited.state = RunState::Exited;
        exited.attempt = 3;
        exited.finished_at_ns = SEC;
        observed.containers[0] = exited;
        let (_, start_again) = plan(&p, &observed, &[], SEC);
        assert_eq!(start_again.actions, start("app", false, 4));
    }

    #[test]
    fn a_never_started_attempt_is_retried_and_then_removed() {
        let p = pod("Never", &[], &["app"]);
        // The agent died between CreateContainer and StartContainer: the next attempt starts,
        // whatever the restart policy (the container never ran).
        let mut observed = in_sandbox(true, vec![container("app", 0, RunState::Created, 0, 0)]);
        let (_, retry) = plan(&p, &observed, &[], SEC);
        assert_eq!(retry.actions, start("app", false, 1));
        observed
            .containers
            .push(container("app", 1, RunState::Running, 0, 0));
        let (_, cleanup) = plan(&p, &observed, &[], SEC);
        assert_eq!(
            cleanup.actions,
            vec![Action::RemoveContainers {
                ids: vec!["app-0".into()]
            }]
        );
    }

    #[test]
    fn dead_sandbox_is_recreated_with_next_attempt() {
        let p = pod("Always", &[], &["app"]);
        let (state, plan) = plan(&p, &in_sandbox(false, vec![]), &[], SEC);
        assert_eq!(state, PodState::NeedsSandbox { attempt: 1 });
        assert_eq!(plan.actions, vec![Action::CreateSandbox { attempt: 1 }]);
    }

    #[test]
    fn a_new_sandbox_continues_the_restart_count() {
        // The node rebooted: the old sandbox is gone with app's attempt 2 in it; a new sandbox
        // (attempt 1) holds nothing yet. app starts as attempt 3 (restartCount 3, as upstream's
        // kubelet counts across sandboxes) and the old container is removed.
        let p = pod("Always", &[], &["app"]);
        let mut observed = in_sandbox(true, vec![]);
        observed.earlier_attempts.insert("app".into(), 2);
        observed.stale_containers.push("old-app-2".into());
        let (state, plan) = plan(&p, &observed, &[], SEC);
        assert_eq!(state, PodState::Running);
        let mut want = start("app", false, 3);
        want.push(Action::RemoveContainers {
            ids: vec!["old-app-2".into()],
        });
        assert_eq!(plan.actions, want);
    }

    #[test]
    fn init_failure_with_never_fails_the_pod() {
        let p = pod("Never", &["i1"], &["app"]);
        let mut failed = container("i1", 0, RunState::Exited, 2, 1);
        failed.init = true;
        let (state, plan) = plan(&p, &in_sandbox(true, vec![failed]), &[], 2 * SEC);
        assert_eq!(state, PodState::InitFailed);
        assert_eq!(plan.actions, vec![Action::StopSandbox { id: "sb".into() }]);
    }
}
