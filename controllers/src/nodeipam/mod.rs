//! Node IPAM (upstream's range allocator, `--allocate-node-cidrs`): every Node without a pod CIDR
//! gets a free block of `--cluster-cidr` in spec.podCIDR and spec.podCIDRs. Decisions in `plan`;
//! here a reflector keeps the Nodes, and each sync (after any change) plans and writes.

pub mod cidrset;
pub mod plan;

use crate::Ctx;
use ipnetwork::IpNetwork;
use k8s_openapi::api::core::v1::Node;
use keelson_daemon::events::EventType;
use keelson_daemon::{reflect, Changes, Objects, Shutdown, SyncLoop};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use plan::{Action, Allocator, NodeView};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use cidrset::{CidrSet, CidrSetError};

/// The Events' reporting component, as upstream's allocator.
pub const COMPONENT: &str = "cidrAllocator";

/// Allocates until `shutdown`. The first plan waits for the full list of Nodes, so a restarted
/// controller manager knows every block in use before it hands one out.
pub async fn run(ctx: Arc<Ctx>, set: CidrSet, shutdown: Shutdown) {
    let client = &ctx.client;
    let changes = Changes::default();
    let nodes = reflect(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        &changes,
    );
    tokio::select! {
        _ = nodes.synced() => {}
        _ = shutdown.requested() => return,
    }
    tracing::info!(cluster_cidr = %set.cluster(), blocks = set.len(), "node IPAM running");
    let alloc = Mutex::new(Allocator::new(set));
    let lp = SyncLoop {
        debounce: Duration::from_millis(20),
        resync: Duration::from_secs(30),
    };
    lp.run(&changes, &shutdown, || sync(&ctx, &nodes, &alloc))
        .await;
}

fn lock(alloc: &Mutex<Allocator>) -> std::sync::MutexGuard<'_, Allocator> {
    alloc.lock().unwrap_or_else(|e| e.into_inner())
}

/// One plan over the Nodes in the store, carried out.
async fn sync(ctx: &Ctx, nodes: &Objects<Node>, alloc: &Mutex<Allocator>) {
    let client = &ctx.client;
    let views: Vec<NodeView> = nodes
        .state()
        .iter()
        .map(|n| NodeView::from_node(n))
        .collect();
    let actions = {
        let mut alloc = lock(alloc);
        let actions = alloc.plan(&views);
        let (in_use, _) = alloc.usage();
        ctx.metrics
            .node_cidrs_in_use
            .set(i64::try_from(in_use).unwrap_or(i64::MAX));
        actions
    };
    for action in actions {
        match action {
            Action::Assign {
                node,
                uid,
                resource_version,
                cidr,
            } => match assign(client, &node, &resource_version, cidr).await {
                Ok(()) => {
                    tracing::info!(node = %node, pod_cidr = %cidr, "pod CIDR allocated");
                    lock(alloc).assigned(&node, &uid, cidr);
                    ctx.metrics.node_cidr_allocations.inc();
                }
                // A conflict means the Node changed since the store saw it: the watch brings
                // the new version, and that change plans again.
                Err(e) => {
                    tracing::warn!(node = %node, pod_cidr = %cidr, error = %e, "pod CIDR not written; retrying")
                }
            },
            Action::Warn {
                node,
                reason,
                message,
                ..
            } => {
                tracing::warn!(node = %node, reason, "{message}");
                if let Some(n) = nodes.object(None, &node) {
                    ctx.events.reporting(COMPONENT).publish(
                        &*n,
                        EventType::Warning,
                        reason,
                        message,
                    );
                }
            }
        }
    }
}

/// Writes the Node's pod CIDR, pinned to the resourceVersion the plan saw.
async fn assign(
    client: &kube::Client,
    node: &str,
    resource_version: &str,
    cidr: IpNetwork,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "spec": { "podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()] },
    });
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
