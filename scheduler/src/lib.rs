//! Keelson's scheduler: filter -> score -> bind, for Pods with no node. Decisions are made one Pod
//! at a time against an in-memory view (reflectors of Pods and Nodes, plus the Pods it has just
//! bound and not yet seen back); bindings are sent concurrently.

pub mod filter;
mod metrics;
pub mod node_info;
pub mod score;

pub use node_info::NodeInfo;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

pub const SCHEDULER_NAME: &str = "default-scheduler";

/// The node for `pod`, or upstream's "0/N nodes are available: ..." message.
pub fn pick(pod: &Pod, nodes: &[NodeInfo]) -> Result<usize, String> {
    let req = node_info::requests(pod);
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    let mut best: Option<(f64, usize)> = None;
    for (i, info) in nodes.iter().enumerate() {
        match filter::unfit(pod, req, info) {
            Some(r) => *reasons.entry(r).or_default() += 1,
            None => {
                let s = score::score(pod, req, info);
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, i));
                }
            }
        }
    }
    best.map(|(_, i)| i).ok_or_else(|| {
        let why: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        format!("0/{} nodes are available: {}.", nodes.len(), why.join(", "))
    })
}

fn pending(p: &Pod) -> bool {
    let spec = p.spec.as_ref();
    spec.is_some_and(|s| s.node_name.as_deref().unwrap_or("").is_empty())
        && spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(SCHEDULER_NAME)
            == SCHEDULER_NAME
        && p.metadata.deletion_timestamp.is_none()
        && !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

struct State {
    client: kube::Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    /// Pods bound (or being bound) by this scheduler that the Pod store does not show yet.
    assumed: Mutex<HashMap<String, (Pod, String)>>,
    /// The last "unschedulable" message written per Pod, so it is not written again.
    reported: Mutex<HashMap<String, String>>,
    binds: Arc<Semaphore>,
    metrics: metrics::Metrics,
}

impl State {
    fn view(&self) -> Vec<NodeInfo> {
        let mut infos: Vec<NodeInfo> = self
            .nodes
            .state()
            .iter()
            .map(|n| NodeInfo::new((**n).clone()))
            .collect();
        let index: HashMap<String, usize> = infos
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node.name_any(), i))
            .collect();
        let mut assumed = self.assumed.lock().unwrap_or_else(|p| p.into_inner());
        let pods = self.pods.state();
        // Forget assumptions the store now reflects (bound, or gone).
        let still_pending: HashSet<String> = pods
            .iter()
            .filter(|p| pending(p))
            .filter_map(|p| p.uid())
            .collect();
        assumed.retain(|uid, _| still_pending.contains(uid));
        for p in pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            if let Some(i) = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .and_then(|n| index.get(n))
            {
                infos[*i].add(p);
            }
        }
        for (pod, node) in assumed.values() {
            if let Some(i) = index.get(node) {
                infos[*i].add(pod);
            }
        }
        infos
    }

    async fn schedule_pending(self: &Arc<Self>) {
        let mut queue: Vec<Arc<Pod>> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| pending(p))
            .collect();
        queue.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let mut infos = self.view();
        for pod in queue {
            let uid = pod.uid().unwrap_or_default();
            if self
                .assumed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&uid)
            {
                continue;
            }
            match pick(&pod, &infos) {
                Ok(i) => {
                    let node = infos[i].node.name_any();
                    infos[i].add(&pod);
                    self.assumed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(uid.clone(), ((*pod).clone(), node.clone()));
                    let me = self.clone();
                    let permit = self.binds.clone().acquire_owned().await;
                    tokio::spawn(async move {
                        let _permit = permit;
                        me.bind(&pod, &node).await;
                    });
                }
                Err(message) => self.unschedulable(&pod, message).await,
            }
        }
    }

    async fn bind(&self, pod: &Pod, node: &str) {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": { "name": pod.name_any(), "uid": pod.uid() },
            "target": { "apiVersion": "v1", "kind": "Node", "name": node },
        });
        let res: Result<serde_json::Value, _> = api
            .create_subresource("binding", &pod.name_any(), &PostParams::default(), &body)
            .await;
        match res {
            Ok(_) => {
                self.metrics.scheduled.inc();
                tracing::debug!(pod = %pod.name_any(), node, "bound");
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), node, error = %e, "binding failed; will retry");
                self.assumed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&pod.uid().unwrap_or_default());
            }
        }
    }

    /// Sets PodScheduled=False (reason Unschedulable) with the message, once per message.
    async fn unschedulable(&self, pod: &Pod, message: String) {
        let uid = pod.uid().unwrap_or_default();
        if self
            .reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&uid)
            == Some(&message)
        {
            return;
        }
        self.metrics.unschedulable.inc();
        tracing::info!(pod = %pod.name_any(), %message, "unschedulable");
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let patch = serde_json::json!({ "status": { "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        }]}});
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => {
                self.reported
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(uid, message);
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), error = %e, "could not report unschedulable")
            }
        }
    }
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run(client: kube::Client, metrics_addr: SocketAddr) -> anyhow::Result<()> {
    let (pods, pod_writer) = reflector::store();
    let (nodes, node_writer) = reflector::store();
    let wake = Arc::new(Notify::new());
    let (w1, w2) = (wake.clone(), wake.clone());
    let pod_stream = reflector::reflector(
        pod_writer,
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects()
    .for_each(move |_| {
        w1.notify_one();
        futures::future::ready(())
    });
    let node_stream = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects()
    .for_each(move |_| {
        w2.notify_one();
        futures::future::ready(())
    });
    tokio::spawn(pod_stream);
    tokio::spawn(node_stream);
    pods.wait_until_ready().await?;
    nodes.wait_until_ready().await?;
    let state = Arc::new(State {
        client,
        pods,
        nodes,
        assumed: Mutex::new(HashMap::new()),
        reported: Mutex::new(HashMap::new()),
        binds: Arc::new(Semaphore::new(32)),
        metrics: metrics::Metrics::default(),
    });
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        metrics_addr,
        state.metrics.registry.clone(),
        keelson_daemon::ready_now(),
    ));
    tracing::info!("scheduler running");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = wake.notified() => {}
            // Unschedulable Pods are tried again as the cluster changes, and at least every 5 s.
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        state.schedule_pending().await;
    }
    tracing::info!("scheduler stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, cpu: &str, extra: serde_json::Value) -> NodeInfo {
        let mut n = serde_json::json!({
            "metadata": { "name": name, "labels": { "disk": if name == "n1" { "ssd" } else { "hdd" } } },
            "spec": {},
            "status": { "allocatable": { "cpu": cpu, "memory": "8Gi", "pods": "110" },
                "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
        });
        if let Some(spec) = extra.get("spec") {
            n["spec"] = spec.clone();
        }
        NodeInfo::new(serde_json::from_value(n).unwrap())
    }

    fn pod(cpu: &str, selector: Option<(&str, &str)>, owner: &str) -> Pod {
        let mut p = serde_json::json!({
            "metadata": { "name": "p", "namespace": "default", "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": true }] },
            "spec": { "containers": [{ "name": "c", "image": "busybox", "resources": { "requests": { "cpu": cpu } } }] },
        });
        if let Some((k, v)) = selector {
            p["spec"]["nodeSelector"] = serde_json::json!({ k: v });
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn filters_explain_why_no_node_fits() {
        let nodes = vec![
            node("n1", false, "4", serde_json::json!({})),
            node("n2", true, "1", serde_json::json!({})),
            node(
                "n3",
                true,
                "4",
                serde_json::json!({ "spec": { "taints": [{ "key": "gpu", "effect": "NoSchedule" }] } }),
            ),
        ];
        let err = pick(&pod("2", None, "o"), &nodes).unwrap_err();
        assert_eq!(err, "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint, 1 node(s) were not ready.");
    }

    #[test]
    fn node_selector_and_resources_choose_the_node() {
        let nodes = vec![
            node("n1", true, "4", serde_json::json!({})),
            node("n2", true, "4", serde_json::json!({})),
        ];
        assert_eq!(pick(&pod("1", Some(("disk", "ssd")), "o"), &nodes), Ok(0));
        assert_eq!(pick(&pod("1", Some(("disk", "hdd")), "o"), &nodes), Ok(1));
        assert!(pick(&pod("1", Some(("disk", "nvme")), "o"), &nodes)
            .unwrap_err()
            .contains("2 node(s) didn't match Pod's node affinity/selector"));
    }

    #[test]
    fn replicas_of_one_owner_spread_over_nodes() {
        let mut nodes = vec![
            node("n1", true, "4", serde_json::json!({})),
            node("n2", true, "4", serde_json::json!({})),
        ];
        let mut placed = Vec::new();
        for _ in 0..4 {
            let p = pod("100m", None, "rs1");
            let i = pick(&p, &nodes).unwrap();
            nodes[i].add(&p);
            placed.push(i);
        }
        placed.sort();
        assert_eq!(placed, [0, 0, 1, 1]);
    }

    #[test]
    fn pods_added_to_a_node_use_up_its_cpu_and_host_ports() {
        let mut nodes = vec![node("n1", true, "2", serde_json::json!({}))];
        nodes[0].add(&pod("1500m", None, "a"));
        assert_eq!(
            pick(&pod("1", None, "b"), &nodes),
            Err("0/1 nodes are available: 1 Insufficient cpu.".into())
        );
        assert_eq!(pick(&pod("500m", None, "b"), &nodes), Ok(0));
        let mut web = pod("100m", None, "c");
        web.spec.as_mut().unwrap().containers[0].ports = Some(vec![serde_json::from_value(
            serde_json::json!({ "containerPort": 80, "hostPort": 8080 }),
        )
        .unwrap()]);
        nodes[0].add(&web);
        assert_eq!(
            pick(&web, &nodes),
            Err("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports.".into())
        );
    }

    #[test]
    fn tolerations_let_pods_onto_tainted_nodes() {
        let nodes = vec![node(
            "n1",
            true,
            "4",
            serde_json::json!({ "spec": { "taints": [{ "key": "gpu", "value": "yes", "effect": "NoSchedule" }] } }),
        )];
        let mut p = pod("1", None, "o");
        p.spec.as_mut().unwrap().tolerations = Some(vec![serde_json::from_value(serde_json::json!({ "key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule" })).unwrap()]);
        assert_eq!(pick(&p, &nodes), Ok(0));
    }
}
