use super::*;
use crate::pod::observed::ObservedSandbox;
use k8s_openapi::api::core::v1::PodSpec;

const SEC: i64 = 1_000_000_000;

static NOT_PROBED: std::sync::LazyLock<HashMap<String, bool>> =
    std::sync::LazyLock::new(HashMap::new);

fn probed(unhealthy: &[String]) -> Probed<'_> {
    Probed {
        unhealthy,
        started: &NOT_PROBED,
    }
}

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
        kind: ContainerKind::Regular,
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
        kind: if init {
            ContainerKind::Init
        } else {
            ContainerKind::Regular
        },
        attempt,
    }]
}

#[test]
fn new_pod_gets_a_sandbox_then_its_init_containers_in_order() {
    let p = pod("Always", &["i1", "i2"], &["app"]);
    let (state, plan) = plan(&p, &ObservedPod::default(), &probed(&[]), 0);
    assert_eq!(state, PodState::NeedsSandbox { attempt: 0 });
    assert_eq!(plan.actions, vec![Action::CreateSandbox { attempt: 0 }]);

    let mut observed = in_sandbox(true, vec![]);
    let (state, plan1) = super::plan(&p, &observed, &probed(&[]), 0);
    assert_eq!(state, PodState::Initializing { index: 0 });
    assert_eq!(plan1.actions, start("i1", true, 0));

    observed
        .containers
        .push(container("i1", 0, RunState::Exited, 0, 1));
    let (state, plan2) = super::plan(&p, &observed, &probed(&[]), 2 * SEC);
    assert_eq!(state, PodState::Initializing { index: 1 });
    assert_eq!(plan2.actions, start("i2", true, 0));

    observed
        .containers
        .push(container("i2", 0, RunState::Exited, 0, 1));
    let (state, plan3) = super::plan(&p, &observed, &probed(&[]), 2 * SEC);
    assert_eq!(state, PodState::Running);
    assert_eq!(plan3.actions, start("app", false, 0));
}

#[test]
fn crashing_container_restarts_at_once_then_with_growing_back_off() {
    let p = pod("Always", &[], &["app"]);
    let mut observed = in_sandbox(true, vec![container("app", 0, RunState::Exited, 1, 100)]);
    let (_, first) = plan(&p, &observed, &probed(&[]), 100 * SEC);
    assert_eq!(first.actions, start("app", false, 1));

    observed
        .containers
        .push(container("app", 1, RunState::Exited, 1, 101));
    let (_, held) = plan(&p, &observed, &probed(&[]), 105 * SEC);
    assert!(held.actions.is_empty(), "{:?}", held.actions);
    assert_eq!(held.waiting["app"].reason, "CrashLoopBackOff");
    assert!(
        held.waiting["app"].message.starts_with("back-off 10s"),
        "{}",
        held.waiting["app"].message
    );
    assert_eq!(held.wake_after, Some(Duration::from_secs(6)));
    let (_, after) = plan(&p, &observed, &probed(&[]), 111 * SEC);
    assert_eq!(after.actions, start("app", false, 2));

    observed
        .containers
        .push(container("app", 2, RunState::Exited, 1, 120));
    let (_, held) = plan(&p, &observed, &probed(&[]), 121 * SEC);
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
        let (state, plan) = plan(&p, &observed, &probed(&[]), 2 * SEC);
        assert_eq!(state == PodState::Completed, done, "{policy} exit {exit}");
        let stops = plan.actions == vec![Action::StopSandbox { id: "sb".into() }];
        assert_eq!(stops, done, "{policy} exit {exit}: {:?}", plan.actions);
    }
}

#[test]
fn failed_liveness_kills_the_running_container() {
    let p = pod("Always", &[], &["app"]);
    let observed = in_sandbox(true, vec![container("app", 0, RunState::Running, 0, 0)]);
    let (_, plan) = plan(&p, &observed, &probed(&["app-0".to_string()]), SEC);
    assert!(matches!(&plan.actions[0], Action::KillContainer { id, .. } if id == "app-0"));
}

#[test]
fn changed_definition_restarts_the_container_at_once() {
    let p = pod("Always", &[], &["app"]);
    let spec = &p.spec.as_ref().unwrap().containers[0];
    let mut running = container("app", 0, RunState::Running, 0, 0);
    running.spec_hash = crate::pod::translate::container_hash(spec);
    let mut observed = in_sandbox(true, vec![running.clone()]);
    let (_, same) = plan(&p, &observed, &probed(&[]), SEC);
    assert!(same.actions.is_empty(), "{:?}", same.actions);

    running.spec_hash = "0000".into();
    observed.containers[0] = running.clone();
    let (_, kill) = plan(&p, &observed, &probed(&[]), SEC);
    assert!(
        matches!(&kill.actions[0], Action::KillContainer { reason, .. } if reason == "definition changed")
    );

    let mut exited = running;
    exited.state = RunState::Exited;
    exited.attempt = 3;
    exited.finished_at_ns = SEC;
    observed.containers[0] = exited;
    let (_, start_again) = plan(&p, &observed, &probed(&[]), SEC);
    assert_eq!(start_again.actions, start("app", false, 4));
}

#[test]
fn a_never_started_attempt_is_retried_and_then_removed() {
    let p = pod("Never", &[], &["app"]);
    // The agent died between CreateContainer and StartContainer: the next attempt starts,
    // whatever the restart policy (the container never ran).
    let mut observed = in_sandbox(true, vec![container("app", 0, RunState::Created, 0, 0)]);
    let (_, retry) = plan(&p, &observed, &probed(&[]), SEC);
    assert_eq!(retry.actions, start("app", false, 1));
    observed
        .containers
        .push(container("app", 1, RunState::Running, 0, 0));
    let (_, cleanup) = plan(&p, &observed, &probed(&[]), SEC);
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
    let (state, plan) = plan(&p, &in_sandbox(false, vec![]), &probed(&[]), SEC);
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
    let (state, plan) = plan(&p, &observed, &probed(&[]), SEC);
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
    failed.kind = ContainerKind::Init;
    let (state, plan) = plan(&p, &in_sandbox(true, vec![failed]), &probed(&[]), 2 * SEC);
    assert_eq!(state, PodState::InitFailed);
    assert_eq!(plan.actions, vec![Action::StopSandbox { id: "sb".into() }]);
}

/// A pod whose first init container, "proxy", is a native sidecar.
fn with_sidecar(policy: &str) -> Pod {
    let mut p = pod(policy, &["proxy", "setup"], &["app"]);
    let init = p.spec.as_mut().unwrap().init_containers.as_mut().unwrap();
    init[0].restart_policy = Some("Always".into());
    p
}

fn sidecar(attempt: u32, state: RunState, exit_code: i32, finished_s: i64) -> ObservedContainer {
    ObservedContainer {
        kind: ContainerKind::Init,
        ..container("proxy", attempt, state, exit_code, finished_s)
    }
}

#[test]
fn a_sidecar_gates_the_next_init_container_until_it_has_started() {
    let mut p = with_sidecar("Never");
    let observed = in_sandbox(true, vec![sidecar(0, RunState::Running, 0, 0)]);
    let (state, next) = plan(&p, &observed, &probed(&[]), SEC);
    assert_eq!(state, PodState::Initializing { index: 1 });
    assert!(next
        .actions
        .iter()
        .any(|a| matches!(a, Action::StartContainer { name, .. } if name == "setup")));
    // With a startup probe that has not passed, setup waits.
    p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].startup_probe =
        Some(Default::default());
    let (state, waiting) = plan(&p, &observed, &probed(&[]), SEC);
    assert_eq!(state, PodState::Initializing { index: 0 });
    assert!(waiting.actions.is_empty(), "{waiting:?}");
    let started = HashMap::from([("proxy-0".to_string(), true)]);
    let passed = Probed {
        unhealthy: &[],
        started: &started,
    };
    assert_eq!(
        plan_state(&p, &observed, &passed),
        PodState::Initializing { index: 1 }
    );
}

fn plan_state(p: &Pod, observed: &ObservedPod, probed: &Probed<'_>) -> PodState {
    plan(p, observed, probed, SEC).0
}

#[test]
fn a_sidecar_restarts_beside_the_main_containers_whatever_the_policy() {
    let p = with_sidecar("Never");
    let setup = ObservedContainer {
        kind: ContainerKind::Init,
        ..container("setup", 0, RunState::Exited, 0, 1)
    };
    let observed = in_sandbox(
        true,
        vec![
            sidecar(0, RunState::Exited, 1, 1),
            setup,
            container("app", 0, RunState::Running, 0, 0),
        ],
    );
    let (state, plan) = plan(&p, &observed, &probed(&[]), 100 * SEC);
    assert_eq!(state, PodState::Running);
    assert!(plan.actions.iter().any(|a| matches!(a, Action::StartContainer { name, kind: ContainerKind::Init, attempt: 1 } if name == "proxy")), "{plan:?}");
}

#[test]
fn sidecars_stop_once_the_main_containers_are_done_then_the_sandbox() {
    let p = with_sidecar("Never");
    let setup = || ObservedContainer {
        kind: ContainerKind::Init,
        ..container("setup", 0, RunState::Exited, 0, 1)
    };
    let done = container("app", 0, RunState::Exited, 0, 2);
    let observed = in_sandbox(
        true,
        vec![sidecar(0, RunState::Running, 0, 0), setup(), done.clone()],
    );
    let (state, stopping) = plan(&p, &observed, &probed(&[]), 3 * SEC);
    assert_eq!(state, PodState::Completed);
    assert_eq!(
        stopping.actions,
        vec![Action::KillContainer {
            id: "proxy-0".into(),
            name: "proxy".into(),
            reason: SIDECAR_DONE.into()
        }]
    );
    let stopped = in_sandbox(
        true,
        vec![sidecar(0, RunState::Exited, 143, 3), setup(), done],
    );
    let (_, plan) = plan(&p, &stopped, &probed(&[]), 4 * SEC);
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a, Action::StopSandbox { .. })),
        "{plan:?}"
    );
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::StartContainer { .. })),
        "{plan:?}"
    );
}

/// `p` with an ephemeral container "debugger" targeting "app".
fn with_debugger(mut p: Pod) -> Pod {
    let debugger = serde_json::from_value(serde_json::json!({
        "name": "debugger", "image": "busybox", "targetContainerName": "app", "stdin": true,
    }))
    .unwrap();
    p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![debugger]);
    p
}

fn ephemeral_starts(plan: &Plan) -> Vec<&Action> {
    plan.actions
        .iter()
        .filter(|a| {
            matches!(
                a,
                Action::StartContainer {
                    kind: ContainerKind::Ephemeral,
                    ..
                }
            )
        })
        .collect()
}

#[test]
fn an_ephemeral_container_starts_once_and_is_never_restarted() {
    let p = with_debugger(pod("Always", &["i1"], &["app"]));
    // During initialization too, as the kubelet starts them.
    let (state, plan) = super::plan(&p, &in_sandbox(true, vec![]), &probed(&[]), 0);
    assert_eq!(state, PodState::Initializing { index: 0 });
    let want = Action::StartContainer {
        name: "debugger".into(),
        kind: ContainerKind::Ephemeral,
        attempt: 0,
    };
    assert_eq!(ephemeral_starts(&plan), vec![&want]);
    // Without a ready sandbox nothing starts.
    let (_, plan) = super::plan(&p, &ObservedPod::default(), &probed(&[]), 0);
    assert!(ephemeral_starts(&plan).is_empty(), "{plan:?}");

    let mut debugger = container("debugger", 0, RunState::Exited, 1, 1);
    debugger.kind = ContainerKind::Ephemeral;
    let observed = in_sandbox(
        true,
        vec![
            container("i1", 0, RunState::Exited, 0, 1),
            container("app", 0, RunState::Running, 0, 0),
            debugger,
        ],
    );
    let (state, plan) = super::plan(&p, &observed, &probed(&[]), 100 * SEC);
    assert_eq!(state, PodState::Running);
    assert!(
        plan.actions.is_empty(),
        "an exited ephemeral container stays exited: {plan:?}"
    );

    // Nor is it started again in a new sandbox once it ran in an older one.
    let mut fresh = in_sandbox(true, vec![]);
    fresh.earlier_attempts.insert("debugger".into(), 0);
    let (_, plan) = super::plan(&p, &fresh, &probed(&[]), 0);
    assert!(ephemeral_starts(&plan).is_empty(), "{plan:?}");
}

#[test]
fn an_ephemeral_container_joins_its_running_target() {
    let p = with_debugger(pod("Always", &[], &["app"]));
    let running = in_sandbox(true, vec![container("app", 0, RunState::Running, 0, 0)]);
    assert_eq!(
        ephemeral_target(&p, "debugger", &running),
        Ok(Some("app-0"))
    );
    let exited = in_sandbox(true, vec![container("app", 0, RunState::Exited, 0, 1)]);
    let err = ephemeral_target(&p, "debugger", &exited).unwrap_err();
    assert!(
        err.contains("\"app\"") && err.contains("not running"),
        "{err}"
    );
    let spec = ephemeral_container(&p, "debugger").expect("the ephemeral container as a Container");
    assert_eq!(
        (spec.image.as_deref(), spec.stdin),
        (Some("busybox"), Some(true))
    );
    assert!(container_spec(&p, "nope", ContainerKind::Ephemeral).is_none());
}
