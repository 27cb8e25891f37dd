//! Node lifecycle against a real keelson-apiserver: the test plays a node agent by writing the
//! Node's Ready condition and renewing its Lease with kubectl, then stops renewing. The
//! controller manager runs with test-sized periods (grace 4 s, checked every 1 s).

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keelson_testing::{binary, eventually, free_port, Apiserver, ChildGuard, Component, Kubectl};
use serde_json::Value;

const NODE: &str = "n1";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

struct Cluster {
    api: Apiserver,
    _daemons: Vec<ChildGuard>,
}

impl Cluster {
    /// The controller manager with test-sized periods, and the scheduler when asked for.
    fn start(scheduler: bool) -> Cluster {
        let api = Apiserver::start();
        let mut cmd = Command::new(binary("keelson-controller-manager"));
        cmd.arg("--kubeconfig")
            .arg(api.kubeconfig_of(Component::ControllerManager))
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .args(["--node-monitor-period=1s", "--node-monitor-grace-period=4s"]);
        let mut daemons = vec![ChildGuard::spawn_logged(
            &mut cmd,
            &api.dir.path().join("cm.log"),
        )];
        if scheduler {
            let mut cmd = Command::new(binary("keelson-scheduler"));
            cmd.arg("--kubeconfig")
                .arg(api.kubeconfig_of(Component::Scheduler))
                .args([
                    "--metrics-bind-address",
                    &format!("127.0.0.1:{}", free_port()),
                ]);
            let log = api.dir.path().join("scheduler.log");
            daemons.push(ChildGuard::spawn_logged(&mut cmd, &log));
        }
        Cluster {
            api,
            _daemons: daemons,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.api.dir.path().join("cm.log")).unwrap_or_default()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        self.api.kubectl_cmd().json(&all).unwrap()
    }

    fn post_ready(&self) {
        post_ready(&self.api.kubectl_cmd(), NODE);
    }

    fn renew_lease(&self) {
        renew_lease(&self.api.kubectl_cmd(), NODE);
    }

    fn ready_status(&self) -> String {
        let node = self.json(&["node", NODE]);
        conditions(&node, "Ready")
    }

    fn health_taints(&self) -> Vec<Value> {
        let node = self.json(&["node", NODE]);
        node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| {
                t["key"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("node.kubernetes.io/"))
            })
            .collect()
    }

    /// Deleted: gone, or terminating (with no agent to finish it, a deleted pod stays
    /// Terminating, as on a real unreachable node; its ReplicaSet already replaces it).
    fn pod_deleted(&self, name: &str) -> bool {
        let out = self.api.kubectl(&[
            "get",
            "pod",
            name,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ]);
        !out.status.success() || !out.stdout.is_empty()
    }
}

/// What the agent writes: the Ready condition with a fresh heartbeat.
fn post_ready(kubectl: &Kubectl, node: &str) {
    let now = now(false);
    let status = format!(
        r#"{{"status":{{"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"{now}","lastTransitionTime":"{now}"}}]}}}}"#
    );
    kubectl.ok(&[
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
}

/// What the agent does every 10 s: renews kube-node-lease/<node>.
fn renew_lease(kubectl: &Kubectl, node: &str) {
    kubectl.apply(&format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {node}\n  namespace: kube-node-lease\nspec:\n  holderIdentity: {node}\n  leaseDurationSeconds: 40\n  renewTime: \"{}\"\n",
        now(true)
    ));
}

/// A node agent's heartbeat in the background: the Lease renewed every second until dropped.
struct Renewer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Renewer {
    fn start(kubectl: Kubectl, node: &str) -> Renewer {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, node) = (stop.clone(), node.to_string());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                renew_lease(&kubectl, &node);
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Renewer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn now(micro: bool) -> String {
    let fmt = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    chrono::Utc::now().format(fmt).to_string()
}

fn conditions(obj: &Value, kind: &str) -> String {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn time(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str().unwrap().parse().unwrap()
}

fn pod_yaml(name: &str, toleration_seconds: Option<u32>) -> String {
    let seconds = toleration_seconds
        .map(|s| format!("\n    tolerationSeconds: {s}"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {NODE}\n  containers:\n  - name: c\n    image: busybox\n  tolerations:\n  - key: {UNREACHABLE}\n    operator: Exists\n    effect: NoExecute{seconds}\n  - key: node.kubernetes.io/not-ready\n    operator: Exists\n    effect: NoExecute\n"
    )
}

#[test]
fn a_silent_node_turns_unknown_its_pods_are_evicted_after_their_toleration_and_it_recovers() {
    let c = Cluster::start(false);
    c.api.apply(&format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n"
    ));
    c.post_ready();
    c.renew_lease();
    c.api.apply(&pod_yaml("short", Some(2)));
    c.api.apply(&pod_yaml("daemon", None));
    c.api.kubectl_cmd().mark_pod_ready("daemon", None).unwrap();

    // A node that keeps renewing its Lease stays Ready well past the grace period.
    let renewing = Instant::now();
    while renewing.elapsed() < Duration::from_secs(7) {
        c.renew_lease();
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(c.ready_status(), "True", "{}", c.log());
    assert!(c.health_taints().is_empty(), "{:?}", c.health_taints());

    // Silence: Unknown with the unreachable taint within grace (4 s) + period (1 s) + slack.
    let stopped = Instant::now();
    let taint = eventually(
        "Ready=Unknown with the unreachable taint",
        Duration::from_secs(30),
        || {
            // The NoExecute taint that evicts, and the NoSchedule one of the condition.
            let taints = c.health_taints();
            let effects: Vec<&str> = taints
                .iter()
                .filter(|t| t["key"] == UNREACHABLE)
                .filter_map(|t| t["effect"].as_str())
                .collect();
            match (c.ready_status().as_str(), taints.len(), effects.as_slice()) {
                ("Unknown", 2, ["NoExecute", "NoSchedule"]) => Ok(taints[0].clone()),
                (ready, ..) => Err(format!("Ready={ready}, taints {taints:?}\n{}", c.log())),
            }
        },
    );
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(10), "marked after {took:?}");
    let node = c.json(&["node", NODE]);
    let ready = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    let added = time(&taint["timeAdded"]);
    // As upstream: RegisteredNode when first seen; NodeNotReady on the Node, and on each pod
    // that stopped being Ready.
    eventually(
        "RegisteredNode and NodeNotReady Events",
        Duration::from_secs(10),
        || {
            let events = c.json(&["events"]);
            let items = events["items"].as_array().cloned().unwrap_or_default();
            let on = |reason: &str, kind: &str, message: &str| {
                items.iter().any(|e| {
                    e["reason"] == reason
                        && e["involvedObject"]["kind"] == kind
                        && e["message"] == message
                })
            };
            let registered = format!("Node {NODE} event: Registered Node {NODE} in Controller");
            let not_ready = format!("Node {NODE} status is now: NodeNotReady");
            (on("RegisteredNode", "Node", &registered)
                && on("NodeNotReady", "Node", &not_ready)
                && on("NodeNotReady", "Pod", "Node is not ready"))
            .then_some(())
            .ok_or_else(|| format!("{events}"))
        },
    );

    // The pod tolerating 2 s goes about 2 s after timeAdded, with an Event saying why.
    eventually("the 2 s pod evicted", Duration::from_secs(20), || {
        c.pod_deleted("short")
            .then_some(())
            .ok_or_else(|| format!("short still there\n{}", c.log()))
    });
    let events = c.json(&["events"]);
    let eviction = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["involvedObject"]["name"] == "short" && e["reason"] == "TaintManagerEviction")
        .unwrap_or_else(|| panic!("no TaintManagerEviction event: {events}"))
        .clone();
    assert_eq!(
        eviction["message"],
        "Marking for deletion Pod default/short"
    );
    let after = time(&eviction["firstTimestamp"]) - added;
    // timeAdded is stored in whole seconds; the eviction is due 2 s after it, checked each second.
    assert!(
        after >= chrono::TimeDelta::seconds(2) && after <= chrono::TimeDelta::seconds(5),
        "evicted {after} after the taint was added"
    );

    // The pod tolerating without seconds (as DaemonSet pods do) stays, no longer Ready.
    std::thread::sleep(Duration::from_secs(3));
    assert!(!c.pod_deleted("daemon"), "{}", c.log());
    assert_eq!(conditions(&c.json(&["pod", "daemon"]), "Ready"), "False");

    // The node comes back: Lease renewed, Ready posted; the taint goes and Ready stays True.
    c.renew_lease();
    c.post_ready();
    eventually("the taint removed", Duration::from_secs(20), || {
        let taints = c.health_taints();
        taints
            .is_empty()
            .then_some(())
            .ok_or_else(|| format!("taints {taints:?}\n{}", c.log()))
    });
    for _ in 0..6 {
        c.renew_lease();
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(c.ready_status(), "True", "{}", c.log());
    assert!(c.health_taints().is_empty());
}

const WEB: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: { app: web }
  template:
    metadata:
      labels: { app: web }
    spec:
      containers:
      - name: c
        image: busybox
      tolerations:
      - { key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2 }
      - { key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2 }
"#;

#[test]
fn a_silent_nodes_pods_are_replaced_on_a_healthy_node() {
    let c = Cluster::start(true);
    let kubectl = c.api.kubectl_cmd();
    let node = |name: &str| {
        c.api.apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"
        ));
        post_ready(&kubectl, name);
    };
    // n1 alone at first, so that the Deployment's pod lands there.
    node("n1");
    let n1 = Renewer::start(kubectl.clone(), "n1");
    c.api.apply(WEB);
    let bound = |node: &str| {
        let pods = c.json(&["pods", "-l", "app=web"]);
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| p["spec"]["nodeName"] == node)
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let first = eventually("the pod bound to n1", Duration::from_secs(60), || {
        bound("n1").pop().ok_or_else(|| c.log())
    });

    // n2 joins and keeps its heartbeat; n1 falls silent.
    node("n2");
    let _n2 = Renewer::start(kubectl.clone(), "n2");
    drop(n1);
    let replacement = eventually("a replacement on n2", Duration::from_secs(60), || {
        bound("n2").pop().ok_or_else(|| c.log())
    });
    assert_ne!(replacement, first);
    assert!(bound("n1").is_empty(), "the pod on n1 was not evicted");
}
