//! Load-balancer IP allocation (as MetalLB's controller and k3s's servicelb, with
//! `--load-balancer-ip-range`): every Service of type LoadBalancer gets an address of the pool in
//! status.loadBalancer.ingress. Decisions in `plan`; here a reflector keeps the Services, and
//! each sync (after any change) plans and writes. Announcing the addresses on the network is the
//! proxy's (`--announce-load-balancers`), as MetalLB's speaker.

pub mod plan;
pub mod pool;

use crate::Ctx;
use k8s_openapi::api::core::v1::Service;
use keelson_daemon::events::EventType;
use keelson_daemon::{reflect, Changes, Objects, Shutdown, SyncLoop};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use plan::{Action, ServiceView, IP_ALLOCATED};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use pool::{Pool, PoolError};

/// The Events' reporting component.
pub const COMPONENT: &str = "service-lb-controller";

/// (namespace, name) of a Service.
type Key = (String, String);

/// What the loop remembers between syncs.
#[derive(Default)]
struct Memory {
    /// The last warning published per Service, so a lasting failure is said once.
    warned: HashMap<Key, String>,
    /// Services written, by the resourceVersion the write replaced: while the store still shows
    /// that version, the plan sees what was written instead, so a sync running before the watch
    /// delivers the write does not hand the same address out twice.
    written: HashMap<Key, (String, ServiceView)>,
}

/// Allocates until `shutdown`. The first plan waits for the full list of Services, so a
/// restarted controller manager knows every address in use before it hands one out.
pub async fn run(ctx: Arc<Ctx>, pool: Pool, shutdown: Shutdown) {
    let changes = Changes::default();
    let services = reflect(
        Api::<Service>::all(ctx.client.clone()),
        watcher::Config::default(),
        &changes,
    );
    tokio::select! {
        _ = services.synced() => {}
        _ = shutdown.requested() => return,
    }
    tracing::info!(pool = %pool, addresses = pool.len(), "load-balancer IP allocation running");
    let memory = Mutex::new(Memory::default());
    let lp = SyncLoop {
        debounce: Duration::from_millis(20),
        resync: Duration::from_secs(30),
    };
    lp.run(&changes, &shutdown, || {
        sync(&ctx, &pool, &services, &memory)
    })
    .await;
}

fn lock(memory: &Mutex<Memory>) -> std::sync::MutexGuard<'_, Memory> {
    memory.lock().unwrap_or_else(|e| e.into_inner())
}

/// The Services in the store, with what this loop wrote in place of versions it replaced.
fn views(
    services: &Objects<Service>,
    written: &mut HashMap<Key, (String, ServiceView)>,
) -> Vec<ServiceView> {
    let seen: Vec<ServiceView> = services
        .state()
        .iter()
        .map(|s| ServiceView::from_service(s))
        .collect();
    let mut stale = HashMap::new();
    let views = seen
        .into_iter()
        .map(|v| {
            let key = (v.namespace.clone(), v.name.clone());
            match written.remove(&key) {
                Some((replaced, after)) if replaced == v.resource_version => {
                    stale.insert(key, (replaced, after.clone()));
                    after
                }
                _ => v,
            }
        })
        .collect();
    *written = stale;
    views
}

/// One plan over the Services in the store, carried out.
async fn sync(ctx: &Ctx, pool: &Pool, services: &Objects<Service>, memory: &Mutex<Memory>) {
    let plan = {
        let mut memory = lock(memory);
        let views = views(services, &mut memory.written);
        plan::plan(pool, &views)
    };
    ctx.metrics
        .load_balancer_ips_in_use
        .set(i64::try_from(plan.in_use).unwrap_or(i64::MAX));
    let mut warned = HashMap::new();
    for action in plan.actions {
        match action {
            Action::Set {
                namespace,
                name,
                resource_version,
                ips,
                event,
            } => {
                let key = (namespace, name);
                set(ctx, memory, key, resource_version, &ips, event).await;
            }
            Action::Warn {
                namespace,
                name,
                reason,
                message,
            } => {
                let key = (namespace, name);
                let said = lock(memory).warned.get(&key) == Some(&message);
                if !said {
                    warn(ctx, services, &key, reason, &message);
                }
                warned.insert(key, message);
            }
        }
    }
    // A Service that got its address (or is gone) is warned again if it fails again.
    lock(memory).warned = warned;
}

/// Writes the addresses, remembers what was written, and publishes the IPAllocated Event.
async fn set(
    ctx: &Ctx,
    memory: &Mutex<Memory>,
    key: Key,
    resource_version: String,
    ips: &[Ipv4Addr],
    event: Option<String>,
) {
    let service = format!("{}/{}", key.0, key.1);
    match write(&ctx.client, &key, &resource_version, ips).await {
        Ok(svc) => {
            tracing::info!(service, ips = ?ips, "status.loadBalancer written");
            if let Some(message) = event {
                ctx.metrics.load_balancer_allocations.inc();
                ctx.events.reporting(COMPONENT).publish(
                    &svc,
                    EventType::Normal,
                    IP_ALLOCATED,
                    message,
                );
            }
            let after = ServiceView::from_service(&svc);
            lock(memory).written.insert(key, (resource_version, after));
        }
        // A conflict means the Service changed since the store saw it: the watch brings the
        // new version, and that change plans again.
        Err(e) => {
            tracing::warn!(service, ips = ?ips, error = %e, "status.loadBalancer not written; retrying")
        }
    }
}

/// Logs a warning and publishes it as an Event on the Service.
fn warn(ctx: &Ctx, services: &Objects<Service>, key: &Key, reason: &str, message: &str) {
    tracing::warn!(service = %format!("{}/{}", key.0, key.1), reason, "{message}");
    if let Some(svc) = services.object(Some(&key.0), &key.1) {
        ctx.events
            .reporting(COMPONENT)
            .publish(&*svc, EventType::Warning, reason, message);
    }
}

/// Writes the Service's status.loadBalancer, pinned to the resourceVersion the plan saw; no
/// addresses clear it.
async fn write(
    client: &kube::Client,
    (namespace, name): &Key,
    resource_version: &str,
    ips: &[Ipv4Addr],
) -> Result<Service, kube::Error> {
    // A merge patch merges objects: `ingress: null` removes the list, `{}` would keep it.
    let ingress = if ips.is_empty() {
        serde_json::Value::Null
    } else {
        ips.iter()
            .map(|ip| serde_json::json!({ "ip": ip.to_string(), "ipMode": "VIP" }))
            .collect()
    };
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "status": { "loadBalancer": { "ingress": ingress } },
    });
    Api::<Service>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}
