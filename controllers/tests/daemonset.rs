//! The DaemonSet controller against a real keelson-apiserver: Nodes are created with kubectl
//! (no agent), and the test plays the agents by reporting daemon pods Running and Ready through
//! the status subresource.

use std::collections::BTreeMap;
use std::time::Duration;

mod common;

use common::Cluster;
use keelson_testing::eventually;
use serde_json::Value;

const DS: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: { app: agent }
  template:
    metadata:
      labels: { app: agent }
    spec:
      nodeSelector: { role: worker }
      containers:
      - name: c
        image: agent:1
"#;

impl Cluster {
    fn node(&self, name: &str, role: &str) {
        self.api.apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{ role: {role} }}\n"
        ));
    }

    /// The DaemonSet's pods that are not being deleted, by node.
    fn pods_by_node(&self) -> BTreeMap<String, Value> {
        self.live(&["pods", "-l", "app=agent"])
            .into_iter()
            .map(|p| (p["spec"]["nodeName"].as_str().unwrap_or("").to_string(), p))
            .collect()
    }

    fn wait_nodes(&self, want: &[&str]) -> BTreeMap<String, Value> {
        eventually(
            "daemon pods on the right nodes",
            Duration::from_secs(60),
            || {
                let pods = self.pods_by_node();
                let nodes: Vec<&str> = pods.keys().map(String::as_str).collect();
                (nodes == want)
                    .then(|| pods.clone())
                    .ok_or_else(|| format!("pods on {nodes:?}, want {want:?}\n{}", self.log()))
            },
        )
    }

    /// What each node's agent reports once its daemon pod runs and is ready.
    fn mark_ready(&self) {
        for pod in self.pods_by_node().values() {
            let ready = pod["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            if ready {
                continue;
            }
            let name = pod["metadata"]["name"].as_str().unwrap();
            // A pod deleted meanwhile (a rollout step) may be gone: not an error.
            let _ = self.api.kubectl_cmd().mark_pod_ready(name, None);
        }
    }

    fn status(&self) -> String {
        self.api.kubectl_ok(&[
            "get", "ds", "agent", "-o",
            "jsonpath={.status.desiredNumberScheduled} {.status.currentNumberScheduled} {.status.numberReady} {.status.updatedNumberScheduled} {.status.numberAvailable} {.status.numberMisscheduled}",
        ])
    }
}

fn label<'a>(pod: &'a Value, key: &str) -> &'a str {
    pod["metadata"]["labels"][key].as_str().unwrap_or("")
}

#[test]
fn one_pod_per_eligible_node_new_nodes_get_theirs_and_a_template_change_rolls() {
    let c = Cluster::start();
    c.node("n1", "worker");
    c.node("n2", "worker");
    c.api.apply(DS);
    let pods = c.wait_nodes(&["n1", "n2"]);
    for pod in pods.values() {
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["name"].as_str()),
            (Some("DaemonSet"), Some("agent"))
        );
        assert_eq!(owner["controller"], true);
        assert_eq!(label(pod, "pod-template-generation"), "1");
        assert!(!label(pod, "controller-revision-hash").is_empty());
        let tolerations = pod["spec"]["tolerations"].to_string();
        assert!(
            tolerations.contains("node.kubernetes.io/unreachable"),
            "{tolerations}"
        );
    }
    let first_hash = label(&pods["n1"], "controller-revision-hash").to_string();

    // A new worker gets its pod; a node the nodeSelector does not match gets none.
    c.node("n3", "edge");
    c.node("n4", "worker");
    c.wait_nodes(&["n1", "n2", "n4"]);
    c.mark_ready();
    c.api
        .kubectl_ok(&["rollout", "status", "ds/agent", "--timeout=60s"]);
    assert_eq!(c.status(), "3 3 3 3 3 0", "{}", c.log());

    // A template change replaces the pods, one node at a time, until all run the new image.
    c.api.kubectl_ok(&["set", "image", "ds/agent", "c=agent:2"]);
    // maxUnavailable 1: while the first new pod is not ready, no other node is touched.
    let new_images = || {
        let pods = c.pods_by_node();
        let new = pods
            .values()
            .filter(|p| p["spec"]["containers"][0]["image"] == "agent:2")
            .count();
        (pods.len(), new)
    };
    eventually("the first node replaced", Duration::from_secs(60), || {
        (new_images() == (3, 1))
            .then_some(())
            .ok_or_else(|| format!("{:?}\n{}", new_images(), c.log()))
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(new_images(), (3, 1), "{}", c.log());
    let rolled = eventually(
        "every node's pod on agent:2",
        Duration::from_secs(90),
        || {
            c.mark_ready();
            let pods = c.pods_by_node();
            let images: Vec<&str> = pods
                .values()
                .map(|p| p["spec"]["containers"][0]["image"].as_str().unwrap_or(""))
                .collect();
            (pods.len() == 3 && images.iter().all(|i| *i == "agent:2"))
                .then(|| pods.clone())
                .ok_or_else(|| format!("images {images:?}\n{}", c.log()))
        },
    );
    for pod in rolled.values() {
        assert_eq!(label(pod, "pod-template-generation"), "2");
        assert_ne!(label(pod, "controller-revision-hash"), first_hash);
    }
    c.mark_ready();
    c.api
        .kubectl_ok(&["rollout", "status", "ds/agent", "--timeout=60s"]);
    assert_eq!(c.status(), "3 3 3 3 3 0", "{}", c.log());

    // Settled: the status it wrote reads back equal, so nothing wakes it again.
    std::thread::sleep(Duration::from_secs(1));
    let before = c.reconciles();
    assert!(before > 0.0, "no reconcile counted");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.reconciles(), before, "still reconciling\n{}", c.log());
}
