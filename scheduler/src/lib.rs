//! Keelson's scheduler: upstream's default profile (filter -> score -> bind) for Pods with no
//! node. Decisions are made one Pod at a time against an in-memory view (reflectors of Pods,
//! Nodes and what the plugins read, plus the Pods it has just bound and not yet seen back);
//! bindings are sent concurrently.

pub mod affinity;
pub mod config;
mod evict;
pub mod framework;
pub mod kept;
mod metrics;
pub mod node_info;
pub mod plugins;
pub mod preemption;
mod state;
mod view;
pub mod volumes;

pub use framework::{feasible_nodes_to_find, Cluster, Cycle, Unfit};
pub use node_info::{NodeInfo, PodInfo};

/// Maps and sets hashed with foldhash: a cycle hashes every domain of every Pod it counts.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use config::Profile;
use k8s_openapi::api::core::v1::{Node, Pod};
use keelson_daemon::{reflect, Changes, Shutdown, SyncLoop};
use kube::api::Api;
use kube::runtime::watcher;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const SCHEDULER_NAME: &str = "default-scheduler";

/// The node for `pod` under upstream's default profile, or upstream's "0/N nodes are
/// available: ..." message. For tests and tools: `cluster` holds the namespaces and selectors.
pub fn pick_in(pod: &Pod, nodes: &[NodeInfo], cluster: &Cluster) -> Result<usize, String> {
    let profile = Profile::default();
    let vols = volumes::PodVolumes::default();
    let info = Arc::new(PodInfo::new(Arc::new(pod.clone())));
    let cycle = Cycle::new(
        info,
        &profile,
        cluster,
        nodes,
        &mut kept::Kept::default(),
        &vols,
        metrics::Timer::none(),
    );
    framework::schedule_one(&cycle, cluster, nodes, 0)
        .0
        .map_err(|u| u.message())
}

/// `pick_in` a cluster of nothing but `nodes`.
pub fn pick(pod: &Pod, nodes: &[NodeInfo]) -> Result<usize, String> {
    pick_in(pod, nodes, &Cluster::default())
}

/// Upstream's FitError text when a PreFilter (the claims) already rules out every node.
pub fn unresolvable_message(nodes: usize, why: &str) -> String {
    format!("0/{nodes} nodes are available: {why}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling..")
}

/// A Pod waiting for one of `profiles`: no node, not ending.
fn pending(p: &Pod, profiles: &[Profile]) -> bool {
    let spec = p.spec.as_ref();
    let name = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or(SCHEDULER_NAME);
    spec.is_some_and(|s| s.node_name.as_deref().unwrap_or("").is_empty())
        && profiles.iter().any(|pr| pr.scheduler_name == name)
        && p.metadata.deletion_timestamp.is_none()
        && !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// Whether spec.schedulingGates still holds the Pod (upstream's SchedulingGates PreEnqueue).
fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// Why the scheduler stopped before its loop began, or stopped acting.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
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
    profiles: Vec<Profile>,
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
    let scheduling = schedule(client, metrics, profiles, &shutdown);
    match elector {
        None => scheduling.await,
        Some(e) => e.lead(&shutdown, scheduling).await?.unwrap_or(Ok(())),
    }
}

/// Starts a watch of every object of a kind, its changes waking the loop.
macro_rules! watch_all {
    ($client:expr, $changes:expr) => {
        reflect(
            Api::all($client.clone()),
            watcher::Config::default(),
            $changes,
        )
    };
}

/// Watches Pods, Nodes, storage and what the plugins read, then binds pending Pods until
/// shutdown.
async fn schedule(
    client: kube::Client,
    metrics: metrics::Metrics,
    profiles: Vec<Profile>,
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
    let stores = view::Stores {
        pods,
        nodes,
        claims: watch_all!(client, &changes),
        volumes: watch_all!(client, &changes),
        classes: watch_all!(client, &changes),
        // Preemption spares Pods that a PodDisruptionBudget protects where it can.
        budgets: watch_all!(client, &changes),
        // namespaceSelector of pod affinity terms.
        namespaces: watch_all!(client, &changes),
        // The default spreading constraints' selectors.
        services: watch_all!(client, &changes),
        replica_sets: watch_all!(client, &changes),
        stateful_sets: watch_all!(client, &changes),
        // Keelson's API server serves no ReplicationControllers; a Kubernetes one does.
        controllers: match serves_replication_controllers(&client).await {
            true => Some(watch_all!(client, &changes)),
            false => None,
        },
    };
    stores.synced().await;
    let state = Arc::new(state::State::new(client, stores, metrics, profiles));
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

/// Whether the API server serves v1 ReplicationControllers (a 404 says it does not).
async fn serves_replication_controllers(client: &kube::Client) -> bool {
    let api: Api<k8s_openapi::api::core::v1::ReplicationController> = Api::all(client.clone());
    let probe = api
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await;
    !matches!(probe, Err(kube::Error::Api(e)) if e.code == 404)
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
