//! The pod status the kubelet would report, computed from the spec and the runtime view. Pure.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::decide::{
    ephemeral_container, ephemeral_containers, init_containers, is_sidecar, regular_containers,
    ContainerKind, PodState, RestartPolicy, Waiting,
};
use super::observed::{ObservedContainer, ObservedPod, RunState};

/// Probe results by container id: readiness, and whether the startup probe has succeeded.
#[derive(Clone, Debug, Default)]
pub struct ProbeView {
    pub ready: HashMap<String, bool>,
    pub started: HashMap<String, bool>,
}

pub struct StatusInput<'a> {
    pub pod: &'a Pod,
    pub observed: &'a ObservedPod,
    pub state: &'a PodState,
    /// Containers held back by the agent (CrashLoopBackOff, ErrImagePull, ...), by name.
    pub waiting: &'a BTreeMap<String, Waiting>,
    pub probes: &'a ProbeView,
    pub host_ip: &'a str,
    pub now: Timestamp,
}

pub fn compute(input: &StatusInput<'_>) -> PodStatus {
    let pod = input.pod;
    let old = pod.status.clone().unwrap_or_default();
    let policy = RestartPolicy::of(pod);
    let init_statuses: Vec<ContainerStatus> = init_containers(pod)
        .iter()
        .map(|c| container_status(c, input, ContainerKind::Init))
        .collect();
    let statuses: Vec<ContainerStatus> = regular_containers(pod)
        .iter()
        .map(|c| container_status(c, input, ContainerKind::Regular))
        .collect();
    let ephemeral: Vec<ContainerStatus> = ephemeral_containers(pod)
        .iter()
        .filter_map(|e| ephemeral_container(pod, &e.name))
        .map(|c| container_status(&c, input, ContainerKind::Ephemeral))
        .collect();
    // Native sidecars count for readiness as the regular containers do.
    let sidecars_ready = init_containers(pod)
        .iter()
        .zip(&init_statuses)
        .filter(|(c, _)| is_sidecar(c))
        .all(|(_, s)| s.ready);
    let containers_ready =
        !statuses.is_empty() && statuses.iter().all(|s| s.ready) && sidecars_ready;
    let phase = phase(input, &statuses, policy);
    let pod_ip = pod_ip(input, &old);
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions(input, &old, containers_ready)),
        host_ip: Some(input.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: input.host_ip.to_string(),
        }]),
        pod_ip: pod_ip.clone(),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]),
        start_time: old.start_time.clone().or(Some(Time(input.now))),
        init_container_statuses: if init_statuses.is_empty() {
            None
        } else {
            Some(init_statuses)
        },
        container_statuses: Some(statuses),
        ephemeral_container_statuses: (!ephemeral.is_empty()).then_some(ephemeral),
        qos_class: Some(crate::pod::qos::qos_class(pod).to_string()),
        ..Default::default()
    }
}

/// The sandbox's address. A finished pod keeps the address it had after its sandbox is stopped,
/// as with the kubelet; pods on the host network have the node's (the runtime reports none).
fn pod_ip(input: &StatusInput<'_>, old: &PodStatus) -> Option<String> {
    let host_network = input
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    input
        .observed
        .sandbox
        .as_ref()
        .and_then(|s| s.ip.clone())
        .or_else(|| {
            input
                .state
                .is_finished()
                .then(|| old.pod_ip.clone())
                .flatten()
        })
        .or_else(|| {
            (host_network && input.observed.sandbox.is_some()).then(|| input.host_ip.to_string())
        })
}

/// PodScheduled, PodReadyToStartContainers, Initialized, ContainersReady and Ready (which also
/// waits for the pod's readiness gates). Conditions others own (a readiness gate's, a
/// DisruptionTarget) are theirs: the status is written as a strategic merge by type.
fn conditions(
    input: &StatusInput<'_>,
    old: &PodStatus,
    containers_ready: bool,
) -> Vec<PodCondition> {
    let initialized = !matches!(
        input.state,
        PodState::NeedsSandbox { .. } | PodState::Initializing { .. } | PodState::InitFailed
    ) || (init_containers(input.pod).is_empty()
        && !matches!(input.state, PodState::InitFailed));
    let sandbox_ready = input.observed.sandbox.as_ref().is_some_and(|s| s.ready);
    let not_ready = (!containers_ready).then_some("ContainersNotReady");
    let gates = unready_gate(input.pod, old);
    let ready_reason = not_ready.or(gates.as_ref().map(|_| "ReadinessGatesNotReady"));
    let mut owned: Vec<PodCondition> = [
        ("PodScheduled", true, None),
        ("PodReadyToStartContainers", sandbox_ready, None),
        (
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
        ),
        ("ContainersReady", containers_ready, not_ready),
        ("Ready", containers_ready && gates.is_none(), ready_reason),
    ]
    .into_iter()
    .map(|(kind, ok, reason)| condition(old, kind, ok, reason, input.now))
    .collect();
    if let (Some(ready), Some(message)) = (owned.last_mut(), gates.filter(|_| containers_ready)) {
        ready.message = Some(message);
    }
    owned
}

/// `status` as far as the agent writes it: without the conditions others own.
pub fn as_written(status: &PodStatus) -> PodStatus {
    let mut s = status.clone();
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| KUBELET_CONDITIONS.contains(&c.type_.as_str()));
    }
    s
}

const KUBELET_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// Why a readiness gate holds the pod unready (upstream's messages), if one does.
fn unready_gate(pod: &Pod, old: &PodStatus) -> Option<String> {
    let gates = pod.spec.as_ref()?.readiness_gates.as_ref()?;
    gates.iter().find_map(|g| {
        let kind = &g.condition_type;
        let found = old.conditions.iter().flatten().find(|c| &c.type_ == kind);
        match found {
            None => Some(format!(
                "corresponding condition of pod readiness gate \"{kind}\" does not exist."
            )),
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate \"{kind}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        }
    })
}

fn phase(
    input: &StatusInput<'_>,
    statuses: &[ContainerStatus],
    policy: RestartPolicy,
) -> &'static str {
    match input.state {
        PodState::InitFailed => return "Failed",
        // The main containers are done, the sidecars still stopping: not terminal yet.
        PodState::Completed if sidecar_running(input) => return "Running",
        PodState::NeedsSandbox { .. } | PodState::Initializing { .. } => return "Pending",
        _ => {}
    }
    let running = statuses
        .iter()
        .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        .count();
    let never_started = statuses
        .iter()
        .filter(|s| {
            s.state.as_ref().is_some_and(|st| st.waiting.is_some())
                && s.last_state.as_ref().is_none_or(|l| l.terminated.is_none())
        })
        .count();
    let terminated: Vec<i32> = statuses
        .iter()
        .filter_map(|s| {
            s.state
                .as_ref()
                .and_then(|st| st.terminated.as_ref())
                .map(|t| t.exit_code)
        })
        .collect();
    if never_started > 0 && running == 0 {
        return "Pending";
    }
    if running > 0 || terminated.len() < statuses.len() {
        return "Running";
    }
    let failed = terminated.iter().any(|&c| c != 0);
    match policy {
        RestartPolicy::Always => "Running",
        RestartPolicy::OnFailure if failed => "Running",
        RestartPolicy::Never if failed => "Failed",
        _ => "Succeeded",
    }
}

fn sidecar_running(input: &StatusInput<'_>) -> bool {
    init_containers(input.pod)
        .iter()
        .filter(|c| is_sidecar(c))
        .any(|c| {
            input
                .observed
                .latest(&c.name)
                .is_some_and(|o| o.state == RunState::Running)
        })
}

fn container_status(
    spec: &Container,
    input: &StatusInput<'_>,
    kind: ContainerKind,
) -> ContainerStatus {
    let latest = input.observed.latest(&spec.name);
    let status = ContainerStatus {
        name: spec.name.clone(),
        image: spec.image.clone().unwrap_or_default(),
        image_id: String::new(),
        restart_count: latest.map_or(0, |c| i32::try_from(c.attempt).unwrap_or(i32::MAX)),
        ready: false,
        started: Some(false),
        ..Default::default()
    };
    match latest {
        Some(c) => observed_status(status, spec, c, input, kind),
        None => {
            let default_wait = Waiting {
                reason: if kind == ContainerKind::Init
                    || init_containers(input.pod).is_empty()
                    || input.state.runs_regular_containers()
                {
                    "ContainerCreating".into()
                } else {
                    "PodInitializing".into()
                },
                message: String::new(),
            };
            let waiting = input.waiting.get(&spec.name).unwrap_or(&default_wait);
            ContainerStatus {
                state: Some(waiting_state(waiting)),
                ..status
            }
        }
    }
}

/// The status of a container the runtime has: running, created (waiting to start) or exited.
fn observed_status(
    mut status: ContainerStatus,
    spec: &Container,
    c: &ObservedContainer,
    input: &StatusInput<'_>,
    kind: ContainerKind,
) -> ContainerStatus {
    let previous = input.observed.previous(&spec.name);
    let waiting = input.waiting.get(&spec.name);
    let last_terminated = |c: &ObservedContainer| ContainerState {
        terminated: Some(terminated(c)),
        ..Default::default()
    };
    status.container_id = Some(format!("containerd://{}", c.id));
    status.image_id = c.image_ref.clone();
    status.last_state = previous.map(last_terminated);
    match c.state {
        RunState::Running => {
            let probes = input.probes;
            let started = probes
                .started
                .get(&c.id)
                .copied()
                .unwrap_or(spec.startup_probe.is_none());
            let ready = probes
                .ready
                .get(&c.id)
                .copied()
                .unwrap_or(spec.readiness_probe.is_none());
            status.started = Some(started);
            // Init containers are never "ready" while running, as in the kubelet; native
            // sidecars are, as regular containers; ephemeral ones never are.
            let counts = match kind {
                ContainerKind::Regular => true,
                ContainerKind::Init => is_sidecar(spec),
                ContainerKind::Ephemeral => false,
            };
            status.ready = counts && started && ready;
            status.state = Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(ns_time(c.started_at_ns)),
                }),
                ..Default::default()
            });
        }
        RunState::Created => {
            let creating = Waiting {
                reason: "ContainerCreating".into(),
                message: String::new(),
            };
            status.state = Some(waiting_state(waiting.unwrap_or(&creating)));
        }
        _ => match waiting {
            // Held back (back-off): waiting, and the exit just seen is the last state.
            Some(w) => {
                status.state = Some(waiting_state(w));
                status.last_state = Some(last_terminated(c));
            }
            None => status.state = Some(last_terminated(c)),
        },
    }
    status
}

fn waiting_state(w: &Waiting) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(w.reason.clone()),
            message: (!w.message.is_empty()).then(|| w.message.clone()),
        }),
        ..Default::default()
    }
}

fn terminated(c: &ObservedContainer) -> ContainerStateTerminated {
    let reason = if !c.reason.is_empty() && c.reason != "Completed" && c.reason != "Error" {
        c.reason.clone()
    } else if c.exit_code == 0 {
        "Completed".into()
    } else {
        "Error".into()
    };
    ContainerStateTerminated {
        container_id: Some(format!("containerd://{}", c.id)),
        exit_code: c.exit_code,
        reason: Some(reason),
        message: (!c.message.is_empty()).then(|| c.message.clone()),
        started_at: (c.started_at_ns > 0).then(|| ns_time(c.started_at_ns)),
        finished_at: (c.finished_at_ns > 0).then(|| ns_time(c.finished_at_ns)),
        signal: None,
    }
}

/// CRI nanoseconds to an API time, truncated to seconds as the API serializes them (so
/// recomputing the status gives the same value and no write happens).
fn ns_time(ns: i64) -> Time {
    Time(Timestamp::from_second(ns / 1_000_000_000).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn condition(
    old: &PodStatus,
    kind: &str,
    ok: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let previous = old
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == kind));
    // The transition time moves only when the status changes.
    let transition = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => Some(Time(Timestamp::from_second(now.as_second()).unwrap_or(now))),
    };
    PodCondition {
        type_: kind.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        last_transition_time: transition,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::decide::plan;
    use crate::pod::observed::ObservedSandbox;
    use k8s_openapi::api::core::v1::{PodSpec, Probe};

    const SEC: i64 = 1_000_000_000;

    fn pod(readiness: bool) -> Pod {
        Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("busybox".into()),
                    readiness_probe: readiness.then(Probe::default),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn running(attempt: u32) -> ObservedContainer {
        ObservedContainer {
            id: format!("c{attempt}"),
            sandbox_id: "sb".into(),
            name: "app".into(),
            kind: ContainerKind::Regular,
            attempt,
            state: RunState::Running,
            created_at_ns: 10 * SEC,
            started_at_ns: 11 * SEC,
            finished_at_ns: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            image: "busybox".into(),
            image_ref: "sha256:abc".into(),
            spec_hash: String::new(),
            log_path: String::new(),
        }
    }

    fn observed(containers: Vec<ObservedContainer>) -> ObservedPod {
        ObservedPod {
            sandbox: Some(ObservedSandbox {
                id: "sb".into(),
                ready: true,
                ip: Some("10.244.0.5".into()),
                attempt: 0,
                created_at_ns: SEC,
            }),
            containers,
            ..Default::default()
        }
    }

    fn status_of(pod: &Pod, observed: &ObservedPod, probes: &ProbeView, now_s: i64) -> PodStatus {
        let started = std::collections::HashMap::new();
        let probed = crate::pod::decide::Probed {
            unhealthy: &[],
            started: &started,
        };
        let (state, plan) = plan(pod, observed, &probed, now_s * SEC);
        compute(&StatusInput {
            pod,
            observed,
            state: &state,
            waiting: &plan.waiting,
            probes,
            host_ip: "172.31.0.2",
            now: Timestamp::from_second(now_s).unwrap(),
        })
    }

    fn cond(s: &PodStatus, kind: &str) -> String {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap()
            .status
            .clone()
    }

    #[test]
    fn running_container_makes_the_pod_running_and_ready() {
        let p = pod(false);
        let s = status_of(&p, &observed(vec![running(0)]), &ProbeView::default(), 20);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.5"));
        assert_eq!(cond(&s, "Ready"), "True");
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert!(cs.ready);
        assert_eq!(cs.container_id.as_deref(), Some("containerd://c0"));
        assert_eq!(cs.image_id, "sha256:abc");
    }

    #[test]
    fn readiness_probe_decides_ready() {
        let p = pod(true);
        let o = observed(vec![running(0)]);
        let unknown = status_of(&p, &o, &ProbeView::default(), 20);
        assert_eq!(cond(&unknown, "Ready"), "False");
        let mut probes = ProbeView::default();
        probes.ready.insert("c0".into(), true);
        let ready = status_of(&p, &o, &probes, 20);
        assert_eq!(cond(&ready, "Ready"), "True");
    }

    #[test]
    fn crash_loop_shows_waiting_with_last_state_and_restart_count() {
        let p = pod(false);
        let mut first = running(0);
        first.state = RunState::Exited;
        first.exit_code = 1;
        first.finished_at_ns = 12 * SEC;
        let mut second = first.clone();
        second.id = "c1".into();
        second.attempt = 1;
        second.finished_at_ns = 14 * SEC;
        let s = status_of(
            &p,
            &observed(vec![first, second]),
            &ProbeView::default(),
            15,
        );
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.restart_count, 1);
        let waiting = cs.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
        let last = cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&s, "Ready"), "False");
    }

    #[test]
    fn recomputing_an_unchanged_pod_gives_the_same_status() {
        let mut p = pod(false);
        let o = observed(vec![running(0)]);
        let first = status_of(&p, &o, &ProbeView::default(), 20);
        p.status = Some(first.clone());
        let again = status_of(&p, &o, &ProbeView::default(), 45);
        assert_eq!(first, again, "no write when nothing changed");
    }

    #[test]
    fn pending_before_the_sandbox_exists() {
        let p = pod(false);
        let s = status_of(&p, &ObservedPod::default(), &ProbeView::default(), 1);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            cs.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("ContainerCreating")
        );
    }
}
