//! Leader election with real processes: two controller managers and two schedulers against a
//! real keelson-apiserver, the test playing the node agent (Nodes it made, Pods it reports
//! Running and Ready). Killing the leaders in the middle of a rollout finishes the rollout with
//! every pod made once; a standby takes over within the lease duration; SIGTERM releases the
//! Lease at once; a leader whose Lease is taken exits at once. The rollout runs on SQLite, and
//! on etcd with the leaders and the standbys on two different API servers.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use keelson_testing::{eventually, Apiserver, Component, Daemon, Etcd};
use serde_json::{json, Value};

/// Short enough for a test, in upstream's proportions (lease > renew deadline > 1.2 x retry).
const LEASE: Duration = Duration::from_secs(4);
const FAST: &[&str] = &[
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
];
const STATUS: &str = "leader_election_master_status";

fn controller_manager(api: &Apiserver, name: &str, flags: &[&str]) -> Daemon {
    // No agent renews node Leases here: node lifecycle must not evict the test's pods.
    let mut all = vec!["--node-monitor-grace-period=1h"];
    all.extend_from_slice(flags);
    Daemon::start_logged(
        api,
        "keelson-controller-manager",
        Component::ControllerManager,
        name,
        &all,
    )
}

fn scheduler(api: &Apiserver, name: &str, flags: &[&str]) -> Daemon {
    Daemon::start_logged(api, "keelson-scheduler", Component::Scheduler, name, flags)
}

/// leader_election_master_status{name=lease} from the daemon's /metrics (None until it answers).
fn status(d: &Daemon, lease: &str) -> Option<f64> {
    d.metric(&format!("{STATUS}{{name=\"{lease}\"}}"))
}

fn wait_status(d: &Daemon, lease: &str, want: f64, timeout: Duration) {
    eventually(
        &format!("{lease} status {want}"),
        timeout,
        || match status(d, lease) {
            Some(v) if v == want => Ok(()),
            other => Err(format!("status {other:?}; log:\n{}", d.log())),
        },
    );
}

fn lease(api: &Apiserver, name: &str) -> Value {
    api.kubectl_cmd()
        .json(&["get", "lease", "-n", "kube-system", name, "-o", "json"])
        .unwrap_or_else(|e| panic!("lease {name}: {e}"))
}

fn holder(api: &Apiserver, name: &str) -> String {
    lease(api, name)["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A Node the scheduler may bind to: Ready, with room for the rollout.
fn node(api: &Apiserver, name: &str) {
    api.apply(&format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"
    ));
    let room = json!({"cpu": "8", "memory": "16Gi", "pods": "110"});
    api.kubectl_cmd()
        .mark_node_ready(name, json!({"allocatable": room, "capacity": room}))
        .unwrap();
}

/// A pod of app=web as the test's agent sees it.
#[derive(Debug)]
struct WebPod {
    name: String,
    node: String,
    /// Its ReplicaSet's pod-template-hash.
    hash: String,
    deleting: bool,
}

/// Every pod of app=web, terminating ones too.
fn pods(api: &Apiserver) -> Vec<WebPod> {
    let list = api
        .kubectl_cmd()
        .json(&["get", "pods", "-l", "app=web", "-o", "json"])
        .unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| WebPod {
            name: text(&p["metadata"]["name"]),
            node: text(&p["spec"]["nodeName"]),
            hash: text(&p["metadata"]["labels"]["pod-template-hash"]),
            deleting: !p["metadata"]["deletionTimestamp"].is_null(),
        })
        .collect()
}

/// What the agents of the Nodes do: report bound Pods Running and Ready, and remove the Pods of
/// `old_hash` whose graceful deletion began. Terminating Pods of any other hash are left, so a
/// Pod made twice and then deleted stays visible. Returns the Ready Pods of the newest hash.
fn play_agents(api: &Apiserver, old_hash: &str) -> usize {
    let mut ready = 0;
    for p in pods(api) {
        if p.deleting && p.hash == old_hash {
            let _ =
                api.kubectl_cmd()
                    .run(&["delete", "pod", &p.name, "--grace-period=0", "--force"]);
        } else if !p.deleting && !p.node.is_empty() {
            let patched = api.kubectl_cmd().mark_pod_ready(&p.name, None);
            if patched.is_ok() && p.hash != old_hash {
                ready += 1;
            }
        }
    }
    ready
}

/// Plays the agents until `kubectl rollout status` says the rollout is complete.
fn roll_to_completion(api: &Apiserver, old_hash: &str, log: impl Fn() -> String) {
    eventually("the rollout to complete", Duration::from_secs(120), || {
        play_agents(api, old_hash);
        let done = api
            .kubectl_cmd()
            .run(&["rollout", "status", "deployment/web", "--timeout=2s"])
            .is_ok();
        done.then_some(()).ok_or_else(|| format!("log:\n{}", log()))
    });
}

/// The pod-template-hash of the Deployment's only Pods.
fn current_hash(api: &Apiserver) -> String {
    let hashes: BTreeSet<String> = pods(api).into_iter().map(|p| p.hash).collect();
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    hashes.into_iter().next().unwrap_or_default()
}

/// A rolling update that replaces at most two Pods at a time and keeps all 20 available, so
/// it takes many steps, each waiting for the test's agents.
const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 20
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 2, maxUnavailable: 0}}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 300
      containers: [{name: web, image: 'example.test/web:1'}]
";

/// Starts `first`, waits until it leads, then the standby, which must stand by.
fn leader_and_standby(first: &Daemon, second: &Daemon, lease: &str) {
    wait_status(first, lease, 1.0, Duration::from_secs(20));
    wait_status(second, lease, 0.0, Duration::from_secs(20));
}

/// How long until `d` leads, from `since`.
fn takeover(d: &Daemon, lease: &str, since: Instant) -> Duration {
    wait_status(d, lease, 1.0, LEASE * 4);
    since.elapsed()
}

#[test]
fn killing_the_leaders_mid_rollout_of_20_pods_makes_each_pod_once() {
    let api = Apiserver::start();
    rollout_with_the_leaders_killed(&api, &api);
}

/// The same on etcd, as several control-plane machines run: two API servers on one etcd, the
/// first replicas of the controller manager and scheduler on one, the standbys on the other.
#[test]
fn on_etcd_behind_two_api_servers_the_standbys_finish_the_rollout() {
    let etcd = Etcd::start();
    let store = ["--etcd-servers", &etcd.endpoints()].map(String::from);
    let store: Vec<&str> = store.iter().map(String::as_str).collect();
    let first = Apiserver::start_with(&store);
    let second = Apiserver::start_sharing(&first, &store);
    rollout_with_the_leaders_killed(&first, &second);
}

/// Leaders on `first`, standbys on `api` (kubectl too); both leaders are killed mid-rollout.
fn rollout_with_the_leaders_killed(first: &Apiserver, api: &Apiserver) {
    node(api, "n1");
    node(api, "n2");
    let mut cm_a = controller_manager(first, "cm-a", FAST);
    wait_status(
        &cm_a,
        "kube-controller-manager",
        1.0,
        Duration::from_secs(20),
    );
    let cm_b = controller_manager(api, "cm-b", FAST);
    let mut sched_a = scheduler(first, "sched-a", FAST);
    wait_status(&sched_a, "kube-scheduler", 1.0, Duration::from_secs(20));
    let sched_b = scheduler(api, "sched-b", FAST);
    leader_and_standby(&cm_a, &cm_b, "kube-controller-manager");
    leader_and_standby(&sched_a, &sched_b, "kube-scheduler");

    // kubectl shows who holds each Lease: the leader's identity, <hostname>_<uuid>.
    let cm_holder = holder(api, "kube-controller-manager");
    assert!(cm_holder.contains('_'), "{cm_holder}");
    assert!(cm_a.log().contains(&cm_holder), "{}", cm_a.log());
    let table = api.kubectl_ok(&["get", "lease", "-n", "kube-system"]);
    assert!(table.contains("HOLDER"), "{table}");
    assert!(table.contains(&cm_holder), "{table}");
    assert!(table.contains(&holder(api, "kube-scheduler")), "{table}");

    api.apply(WEB);
    roll_to_completion(api, "", || cm_a.log());
    let v1 = current_hash(api);
    api.kubectl_ok(&["set", "image", "deployment/web", "web=example.test/web:2"]);
    // Mid-rollout: a few Pods of the new template Ready, most still to come.
    eventually("the rollout under way", Duration::from_secs(60), || {
        let n = play_agents(api, &v1);
        (4..20)
            .contains(&n)
            .then_some(())
            .ok_or(format!("{n} new pods ready; log:\n{}", cm_a.log()))
    });
    // The standbys have done nothing so far.
    assert!(
        !cm_b.log().contains("controllers running"),
        "{}",
        cm_b.log()
    );
    assert!(
        !sched_b.log().contains("scheduler running"),
        "{}",
        sched_b.log()
    );
    let killed = Instant::now();
    cm_a.kill9();
    sched_a.kill9();
    let cm_took = takeover(&cm_b, "kube-controller-manager", killed);
    let sched_took = takeover(&sched_b, "kube-scheduler", killed);
    // Standbys try every retry period (jittered up to 2.2x): lease + 2.2 x 0.5 s, plus slack
    // for a busy machine.
    for (who, took) in [("controller manager", cm_took), ("scheduler", sched_took)] {
        assert!(
            took < LEASE + Duration::from_secs(4),
            "the standby {who} took {took:?}"
        );
    }
    assert_ne!(holder(api, "kube-controller-manager"), cm_holder);
    eprintln!("takeover after SIGKILL: controller manager {cm_took:?}, scheduler {sched_took:?}");

    roll_to_completion(api, &v1, || cm_b.log());
    // The old template's last Pods may still be finishing their graceful deletion.
    eventually("the old pods gone", Duration::from_secs(20), || {
        play_agents(api, &v1);
        let old = pods(api).into_iter().filter(|p| p.hash == v1).count();
        (old == 0).then_some(()).ok_or(format!("{old} old pods"))
    });
    // Every Pod of the new template made once: 20 in all, bound, none being deleted (a Pod
    // made twice would have been deleted again, and stays terminating on a Node with no
    // agent); the old template's all gone.
    let all = pods(api);
    assert!(all.iter().all(|p| p.hash != v1), "{all:?}");
    let names: BTreeSet<&String> = all.iter().map(|p| &p.name).collect();
    assert_eq!((all.len(), names.len()), (20, 20), "{all:?}");
    assert!(
        all.iter().all(|p| !p.node.is_empty() && !p.deleting),
        "{all:?}"
    );
    let rs = api
        .kubectl_cmd()
        .json(&["get", "rs", "-l", "app=web", "-o", "json"])
        .unwrap();
    let ready: Vec<i64> = rs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"]["readyReplicas"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(ready.iter().sum::<i64>(), 20, "{rs}");
    assert!(ready.contains(&20), "{rs}");
}

#[test]
fn sigterm_releases_the_lease_at_once_and_a_taken_lease_stops_the_leader() {
    let api = Apiserver::start();
    // A long lease: a standby that took over only after it expired would take 30 s.
    let slow = [
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=500ms",
    ];
    let mut a = controller_manager(&api, "cm-a", &slow);
    wait_status(&a, "kube-controller-manager", 1.0, Duration::from_secs(20));
    let mut b = controller_manager(&api, "cm-b", &slow);
    leader_and_standby(&a, &b, "kube-controller-manager");
    let before = lease(&api, "kube-controller-manager");
    assert_eq!(before["spec"]["leaseDurationSeconds"], 30, "{before}");

    let stopped = Instant::now();
    let exit = a.terminate(Duration::from_secs(10));
    assert!(
        exit.is_some_and(|s| s.success()),
        "{exit:?}; log:\n{}",
        a.log()
    );
    assert!(a.log().contains("lease released"), "{}", a.log());
    let took = takeover(&b, "kube-controller-manager", stopped);
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} after a release"
    );
    let after = lease(&api, "kube-controller-manager");
    let transitions = |l: &Value| l["spec"]["leaseTransitions"].as_i64().unwrap_or(-1);
    assert_eq!(transitions(&after), transitions(&before) + 1, "{after}");

    // Someone else holds the Lease now: the leader stops at its next renewal.
    let taken = Instant::now();
    api.kubectl_ok(&[
        "patch",
        "lease",
        "kube-controller-manager",
        "-n",
        "kube-system",
        "--type=merge",
        "-p",
        r#"{"spec":{"holderIdentity":"intruder"}}"#,
    ]);
    let exit = eventually("the old leader to exit", Duration::from_secs(10), || {
        b.exit_status().ok_or("still running".to_string())
    });
    assert!(
        taken.elapsed() < Duration::from_secs(3),
        "{:?}",
        taken.elapsed()
    );
    assert!(!exit.success(), "{exit:?}");
    assert!(b.log().contains("leaderelection lost"), "{}", b.log());
    assert_eq!(holder(&api, "kube-controller-manager"), "intruder");
}

/// A leader whose work keeps its thread busy past the renew deadline (as a scheduler's pass
/// over thousands of Pods does) still renews its Lease, so a standby trying all along never
/// gets it. Before renewal ran as a task of its own, the lease expired under the busy work:
/// the scheduler of a 5,000-pod workload exited with "leaderelection lost".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_busy_past_its_renew_deadline_keeps_its_lease() {
    use keelson_daemon::leader::{Config, Elector};
    let api = Apiserver::start();
    let config = |identity: &str| Config {
        identity: identity.into(),
        lease_duration: LEASE,
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
        ..Config::new("kube-system", "busy")
    };
    let (_stop, shutdown) = keelson_daemon::Shutdown::manual();
    let standby_shutdown = shutdown.clone();
    let mut standby = Elector::new(api.client().await, config("busy-standby"));
    let leader = Elector::new(api.client().await, config("busy-leader"));
    let busy = LEASE * 2;
    let (tried, outcome) = tokio::sync::oneshot::channel();
    let work = async move {
        // The standby starts trying once this process leads, and stops a second before the
        // work ends (and the Lease is released).
        let trying = busy - Duration::from_secs(1);
        tokio::spawn(async move {
            let acquired = tokio::time::timeout(trying, standby.acquire(&standby_shutdown))
                .await
                .is_ok();
            let _ = tried.send(acquired);
        });
        // Blocks this thread: nothing else of this task runs until it ends.
        std::thread::sleep(busy);
    };
    leader
        .lead(&shutdown, work)
        .await
        .expect("the busy leader kept its lease")
        .expect("it led");
    let standby_acquired = outcome.await.unwrap();
    assert!(
        !standby_acquired,
        "the standby took the lease while the leader was busy"
    );
    // lead() released the Lease when the work ended.
    assert_eq!(holder(&api, "busy"), "");
}
