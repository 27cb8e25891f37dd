//! The node lifecycle controller with taint eviction: watches Nodes, their Leases and Pods;
//! marks silent nodes Unknown and taints them (monitor), and deletes pods that do not tolerate
//! a node's NoExecute taints, at once or after their tolerationSeconds (eviction).

pub mod eviction;
pub mod monitor;
mod writes;

use crate::Ctx;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use keelson_daemon::{reflect, Changes, Objects, Shutdown};
use kube::api::Api;
use kube::runtime::watcher;
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Where nodes keep their heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
pub const COMPONENT: &str = "node-controller";

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// How often node health is checked (`--node-monitor-period`).
    pub monitor_period: Duration,
    /// How long a node may be silent before it is Unknown (`--node-monitor-grace-period`).
    pub grace_period: Duration,
}

/// The informers' stores this controller decides from.
struct Stores {
    nodes: Objects<Node>,
    leases: Objects<Lease>,
    pods: Objects<Pod>,
}

/// What the controller remembers between passes.
/// A reference to a Node that may be gone from the store.
fn node_ref(name: &str, uid: &Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        uid: uid.clone(),
        ..Default::default()
    }
}

#[derive(Default)]
struct State {
    probes: monitor::Probes,
    first_seen: eviction::FirstSeen,
    /// Pods already deleted by us (by uid), so a lagging store does not evict them twice.
    evicted: HashSet<String>,
    /// Nodes seen, by name, with their uid: Registered/Removing Events when this changes.
    known: HashMap<String, Option<String>>,
}

/// Runs until `shutdown`: a pass every monitor period, after any change, and when the next
/// eviction falls due.
pub async fn run(ctx: Arc<Ctx>, cfg: Config, shutdown: Shutdown) {
    let changes = Changes::default();
    let client = &ctx.client;
    let all = watcher::Config::default();
    let stores = Stores {
        nodes: reflect(Api::all(client.clone()), all.clone(), &changes),
        leases: reflect(
            Api::namespaced(client.clone(), LEASE_NAMESPACE),
            all.clone(),
            &changes,
        ),
        pods: reflect(Api::all(client.clone()), all, &changes),
    };
    // Half-filled stores would mark nodes whose Lease simply was not listed yet.
    tokio::select! {
        _ = futures::future::join3(
            stores.nodes.synced(),
            stores.leases.synced(),
            stores.pods.synced(),
        ) => {}
        _ = shutdown.requested() => return,
    }
    let mut state = State::default();
    loop {
        changes.clear();
        let now = Timestamp::now();
        let next = state.pass(&ctx, &stores, &cfg, now).await;
        let until_next = next
            .map(|t| t.duration_since(now).unsigned_abs())
            .unwrap_or(cfg.monitor_period)
            .min(cfg.monitor_period);
        tokio::select! {
            _ = changes.changed() => tokio::time::sleep(Duration::from_millis(50)).await,
            _ = tokio::time::sleep(until_next) => {}
            _ = shutdown.requested() => return,
        }
    }
}

impl State {
    /// One pass over every node; returns when the next eviction falls due.
    async fn pass(
        &mut self,
        ctx: &Ctx,
        stores: &Stores,
        cfg: &Config,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let nodes = stores.nodes.state();
        let pods = stores.pods.state();
        let mut by_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
        for p in &pods {
            if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                by_node.entry(node).or_default().push(p);
            }
        }
        let names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        self.announce(ctx, &nodes);
        self.probes.retain(|n| names.contains(n));
        let live: HashSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
        self.evicted.retain(|uid| live.contains(uid));
        let mut next: Option<Timestamp> = None;
        let mut present = HashSet::new();
        for node in &nodes {
            let on_node = by_node.remove(node.name_any().as_str()).unwrap_or_default();
            let taints = self
                .check_health(ctx, stores, cfg, node, &on_node, now)
                .await;
            for t in &taints {
                present.insert((node.name_any(), t.key.clone()));
            }
            let due = self
                .evict(ctx, &node.name_any(), &taints, &on_node, now)
                .await;
            next = match (next, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        self.first_seen
            .retain(|n, k| present.contains(&(n.to_string(), k.to_string())));
        next
    }

    /// Upstream's RegisteredNode and RemovingNode Events, for nodes new or gone since the last
    /// pass (all of them, after a restart, as upstream).
    fn announce(&mut self, ctx: &Ctx, nodes: &[Arc<Node>]) {
        let events = ctx.events.reporting(COMPONENT);
        let now: HashMap<String, Option<String>> =
            nodes.iter().map(|n| (n.name_any(), n.uid())).collect();
        for (name, uid) in now.iter().filter(|(n, _)| !self.known.contains_key(*n)) {
            let message = format!("Node {name} event: Registered Node {name} in Controller");
            events.publish_ref(
                node_ref(name, uid),
                EventType::Normal,
                "RegisteredNode",
                message,
            );
        }
        for (name, uid) in self.known.iter().filter(|(n, _)| !now.contains_key(*n)) {
            let message = format!("Node {name} event: Removing Node {name} from Controller");
            events.publish_ref(
                node_ref(name, uid),
                EventType::Normal,
                "RemovingNode",
                message,
            );
        }
        self.known = now;
    }

    /// Marks `node` from its heartbeats; returns the taints it has after this pass.
    async fn check_health(
        &mut self,
        ctx: &Ctx,
        stores: &Stores,
        cfg: &Config,
        node: &Node,
        pods: &[&Pod],
        now: Timestamp,
    ) -> Vec<Taint> {
        let name = node.name_any();
        let lease = stores.leases.object(Some(LEASE_NAMESPACE), &name);
        let heartbeat = monitor::Heartbeat {
            lease_renewed: lease
                .as_ref()
                .and_then(|l| l.spec.as_ref()?.renew_time.as_ref())
                .map(|t| t.0),
            ready_heartbeat: monitor::ready_heartbeat(node),
        };
        let last_change = self.probes.observe(&name, heartbeat, now);
        let update = monitor::plan(node, last_change, now, cfg.grace_period);
        writes::apply(ctx, node, &update, pods).await;
        update
            .taints
            .or_else(|| node.spec.as_ref().and_then(|s| s.taints.clone()))
            .unwrap_or_default()
    }

    /// Deletes the pods on `node` that are due; returns when the next one falls due.
    async fn evict(
        &mut self,
        ctx: &Ctx,
        node: &str,
        taints: &[Taint],
        pods: &[&Pod],
        now: Timestamp,
    ) -> Option<Timestamp> {
        if !taints.iter().any(|t| t.effect == "NoExecute") {
            return None;
        }
        let added: HashMap<String, Timestamp> = taints
            .iter()
            .map(|t| (t.key.clone(), self.first_seen.added(node, t, now)))
            .collect();
        let pending = pods
            .iter()
            .copied()
            .filter(|p| !self.evicted.contains(&p.uid().unwrap_or_default()));
        let plan = eviction::plan(
            pending,
            taints,
            |t| added.get(&t.key).copied().unwrap_or(now),
            now,
        );
        for pod in plan.now {
            if writes::evict(ctx, pod).await {
                self.evicted.insert(pod.uid().unwrap_or_default());
            }
        }
        plan.next
    }
}
