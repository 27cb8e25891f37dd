//! Keelson's scheduler: filter -> score -> bind, for Pods with no node. Decisions are made one Pod
//! at a time against an in-memory view (reflectors of Pods and Nodes, plus the Pods it has just
//! bound and not yet seen back); bindings are sent concurrently.

mod evict;
pub mod filter;
mod metrics;
pub mod node_info;
pub mod preemption;
pub mod score;
mod view;
pub mod volumes;

pub use node_info::NodeInfo;

mod state;

use k8s_openapi::api::core::v1::{Node, Pod};
use keelson_daemon::{reflect, Changes, Shutdown, SyncLoop};
use kube::api::Api;
use kube::runtime::watcher;
use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const SCHEDULER_NAME: &str = "default-scheduler";

/// The node for `pod`, or upstream's "0/N nodes are available: ..." message.
pub fn pick(pod: &Pod, nodes: &[NodeInfo]) -> Result<usize, String> {
    pick_for(pod, nodes, &volumes::PodVolumes::default())
}

/// `pick`, where the node must also serve the Pod's claims.
pub fn pick_for(
    pod: &Pod,
    nodes: &[NodeInfo],
    vols: &volumes::PodVolumes,
) -> Result<usize, String> {
    pick_from(pod, nodes, vols, 0).0.map_err(|u| u.message())
}

/// Why no node fits a Pod: the filters' reasons counted over nodes, and the nodes where
/// evicting lower-priority Pods could make room (preemption's candidates).
#[derive(Debug)]
pub struct Unfit {
    pub nodes: usize,
    reasons: HashMap<Cow<'static, str>, usize>,
    pub could_help: Vec<usize>,
}

impl Unfit {
    /// Upstream's FitError text when preemption found no victims on any node (or was not
    /// tried): what preemption made of each node follows the filters' reasons. The doubled
    /// final period is upstream's too.
    pub fn message(&self) -> String {
        if self.nodes == 0 {
            return "no nodes available to schedule pods".into();
        }
        let nodes = self.nodes;
        let mut preemption: HashMap<Cow<'static, str>, usize> = HashMap::new();
        let helpable = self.could_help.len();
        if helpable > 0 {
            preemption.insert(
                "No preemption victims found for incoming pod".into(),
                helpable,
            );
        }
        if nodes > helpable {
            preemption.insert(
                "Preemption is not helpful for scheduling".into(),
                nodes - helpable,
            );
        }
        self.message_with(&format!(
            "0/{nodes} nodes are available: {}.",
            histogram(&preemption)
        ))
    }

    /// The FitError text with preemption's verdict: why the Pod may not preempt, or empty
    /// once it nominated a node (upstream then adds nothing).
    pub fn message_with(&self, preemption: &str) -> String {
        let filters = format!(
            "0/{} nodes are available: {}.",
            self.nodes,
            histogram(&self.reasons)
        );
        if preemption.is_empty() {
            filters
        } else {
            format!("{filters} preemption: {preemption}.")
        }
    }
}

/// How many fitting nodes to find before the search stops, as upstream's numFeasibleNodesToFind
/// with the adaptive percentageOfNodesToScore: every node below 100; else 50% less one point
/// per 125 nodes, never under 5% nor under 100 nodes. A large cluster is not scored whole for
/// every Pod (at 5,000 nodes, 500 fitting ones are enough).
pub fn feasible_nodes_to_find(all: usize) -> usize {
    const MIN_NODES: usize = 100;
    const MIN_PERCENT: usize = 5;
    if all < MIN_NODES {
        return all;
    }
    let percent = 50usize.saturating_sub(all / 125).max(MIN_PERCENT);
    (all * percent / 100).max(MIN_NODES)
}

/// `pick_for` from node `start` on, wrapping around, until `feasible_nodes_to_find` nodes fit;
/// also returns how many nodes were looked at, so that the next Pod starts after them (as
/// upstream's nextStartNodeIndex) and every node gets its turn. When none fits, every node was
/// looked at and the message counts them all.
pub fn pick_from(
    pod: &Pod,
    nodes: &[NodeInfo],
    vols: &volumes::PodVolumes,
    start: usize,
) -> (Result<usize, Unfit>, usize) {
    let req = node_info::requests(pod);
    let want = feasible_nodes_to_find(nodes.len());
    let mut reasons: HashMap<Cow<'static, str>, usize> = HashMap::new();
    let mut could_help = Vec::new();
    let mut best: Option<(f64, usize)> = None;
    let (mut found, mut looked) = (0, 0);
    for k in 0..nodes.len() {
        if found >= want {
            break;
        }
        let i = (start + k) % nodes.len();
        let info = &nodes[i];
        looked += 1;
        let unfit = filter::unfit(pod, req, info)
            .or_else(|| volumes::unfit(vols, &info.node).map(Cow::Borrowed));
        match unfit {
            Some(r) => {
                if filter::preemption_could_help(&r) {
                    could_help.push(i);
                }
                *reasons.entry(r).or_default() += 1
            }
            None => {
                found += 1;
                let s = score::score(pod, req, info);
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, i));
                }
            }
        }
    }
    let picked = match best {
        Some((_, i)) => Ok(i),
        None => Err(Unfit {
            nodes: nodes.len(),
            reasons,
            could_help,
        }),
    };
    (picked, looked)
}

/// Upstream's FitError text when a PreFilter (the claims) already rules out every node.
pub fn unresolvable_message(nodes: usize, why: &str) -> String {
    format!("0/{nodes} nodes are available: {why}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling..")
}

/// "COUNT REASON" entries sorted as strings, as upstream sorts them.
fn histogram(reasons: &HashMap<Cow<'static, str>, usize>) -> String {
    let mut lines: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    lines.sort();
    lines.join(", ")
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

/// Why the scheduler stopped before its loop began, or stopped acting.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("the {0} watch stopped before its first list")]
    WatchEnded(&'static str),
    /// It lost its Lease: another scheduler may be binding now (the process exits).
    #[error(transparent)]
    Leader(#[from] keelson_daemon::leader::LeaderError),
}

/// Runs until SIGTERM or Ctrl-C; with `leader`, schedules only while this process holds that
/// Lease (standing by with /healthz and /metrics until it does).
pub async fn run(
    client: kube::Client,
    metrics_addr: SocketAddr,
    leader: Option<keelson_daemon::leader::Config>,
) -> Result<(), SchedulerError> {
    let shutdown = Shutdown::on_signal();
    let metrics = metrics::Metrics::default();
    let elector = leader.map(|c| keelson_daemon::leader::Elector::new(client.clone(), c));
    let mut health = keelson_daemon::ready_now();
    if let Some(e) = &elector {
        health = health.with_metrics(e.registry());
    }
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        metrics_addr,
        metrics.registry.clone(),
        health,
    ));
    let scheduling = schedule(client, metrics, &shutdown);
    match elector {
        None => scheduling.await,
        Some(e) => e.lead(&shutdown, scheduling).await?.unwrap_or(Ok(())),
    }
}

/// Watches Pods, Nodes and storage, then binds pending Pods until shutdown.
async fn schedule(
    client: kube::Client,
    metrics: metrics::Metrics,
    shutdown: &Shutdown,
) -> Result<(), SchedulerError> {
    let changes = Changes::default();
    // Every watch lists at once, and the first pass waits for all of them: a Pod's claims or a
    // budget not yet listed would look missing.
    let pods = reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        &changes,
    );
    let nodes = reflect(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        &changes,
    );
    let volumes = state::VolumeStores {
        claims: reflect(
            Api::all(client.clone()),
            watcher::Config::default(),
            &changes,
        ),
        volumes: reflect(
            Api::all(client.clone()),
            watcher::Config::default(),
            &changes,
        ),
        classes: reflect(
            Api::all(client.clone()),
            watcher::Config::default(),
            &changes,
        ),
    };
    // Preemption spares Pods that a PodDisruptionBudget protects where it can.
    let budgets = reflect(
        Api::all(client.clone()),
        watcher::Config::default(),
        &changes,
    );
    let listed = [
        ("Pod", pods.wait_until_ready().await),
        ("Node", nodes.wait_until_ready().await),
        (
            "PersistentVolumeClaim",
            volumes.claims.wait_until_ready().await,
        ),
        ("PersistentVolume", volumes.volumes.wait_until_ready().await),
        ("StorageClass", volumes.classes.wait_until_ready().await),
        ("PodDisruptionBudget", budgets.wait_until_ready().await),
    ];
    if let Some((kind, _)) = listed.iter().find(|(_, r)| r.is_err()) {
        return Err(SchedulerError::WatchEnded(kind));
    }
    let state = Arc::new(state::State::new(
        client, pods, nodes, volumes, budgets, metrics,
    ));
    tracing::info!("scheduler running");
    // No debounce: a Pod waits for nothing but the decision. Unschedulable Pods are tried again
    // as the cluster changes, and at least every 5 s.
    let schedule = SyncLoop {
        debounce: Duration::ZERO,
        resync: Duration::from_secs(5),
    };
    schedule
        .run(&changes, shutdown, || state.schedule_pending())
        .await;
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
        assert_eq!(err, "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: }, 1 node(s) were not ready. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling..");
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
            Err("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..".into())
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
            Err("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..".into())
        );
    }

    #[test]
    fn preemptions_verdict_ends_the_message_as_upstreams() {
        let mut nodes = vec![node("n1", true, "1", serde_json::json!({}))];
        nodes[0].add(&pod("900m", None, "a"));
        let vols = volumes::PodVolumes::default();
        let unfit = pick_from(&pod("500m", None, "b"), &nodes, &vols, 0)
            .0
            .unwrap_err();
        assert_eq!(unfit.could_help, [0]);
        assert_eq!(
            unfit.message_with("not eligible due to preemptionPolicy=Never."),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."
        );
        // Once it nominated a node, upstream reports the filters alone.
        assert_eq!(
            unfit.message_with(""),
            "0/1 nodes are available: 1 Insufficient cpu."
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

    #[test]
    fn large_clusters_are_searched_in_part_as_upstream() {
        // Upstream's numFeasibleNodesToFind with the adaptive percentage.
        for (all, want) in [
            (5, 5),
            (99, 99),
            (100, 100),
            (1000, 420),
            (5000, 500),
            (6000, 300),
            (20000, 1000),
        ] {
            assert_eq!(feasible_nodes_to_find(all), want, "{all} nodes");
        }
    }

    #[test]
    fn each_search_starts_where_the_last_one_stopped() {
        let nodes: Vec<NodeInfo> = (0..200)
            .map(|i| node(&format!("n{i}"), true, "4", serde_json::json!({})))
            .collect();
        let vols = volumes::PodVolumes::default();
        let (picked, looked) = pick_from(&pod("1", None, "o"), &nodes, &vols, 0);
        assert_eq!(looked, 100, "100 fitting nodes are enough out of 200");
        assert!(picked.unwrap() < 100);
        // Wrapping around the end: nodes 150..200 then 0..50.
        let (picked, looked) = pick_from(&pod("1", None, "o"), &nodes, &vols, 150);
        assert_eq!(looked, 100);
        let i = picked.unwrap();
        assert!(
            !(50..150).contains(&i),
            "picked node {i}, outside the nodes searched"
        );
        // Nothing fits: every node is looked at, and the message counts them all.
        let (picked, looked) = pick_from(&pod("8", None, "o"), &nodes, &vols, 150);
        assert_eq!(looked, 200);
        assert!(picked
            .unwrap_err()
            .message()
            .starts_with("0/200 nodes are available: 200 Insufficient cpu."));
    }
}
