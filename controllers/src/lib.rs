//! Keelson's controllers: deployment, replicaset, daemonset, job, cronjob, horizontal pod
//! autoscaler, endpointslice, the
//! garbage collector, the namespace controller, node lifecycle (with taint eviction), node IPAM,
//! load-balancer IP allocation and the CSR controllers. Ordinary API clients (kube-rs), as against any cluster.

pub mod api;
pub mod certificates;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpointslice;
pub mod error;
pub mod gc;
pub mod hpa;
pub mod job;
pub mod loadbalancer;
pub mod metrics;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod pods;
pub mod replicaset;
pub mod resourcequota;
pub mod root_ca_publisher;
pub mod serviceaccounts;
pub mod statefulset;
pub mod volume;

pub use api::is_not_found;
pub use error::Error;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Ctx {
    pub client: kube::Client,
    pub metrics: metrics::Metrics,
    /// Each controller reports as itself through `events.reporting(COMPONENT)`.
    pub events: keelson_daemon::events::Recorder,
}

pub(crate) fn error_policy<K>(obj: Arc<K>, e: &Error, ctx: Arc<Ctx>) -> Action
where
    K: kube::ResourceExt,
{
    ctx.metrics.errors.inc();
    tracing::warn!(name = %obj.name_any(), namespace = ?obj.namespace(), error = %e, "reconcile failed; retrying in 2 s");
    Action::requeue(Duration::from_secs(2))
}

/// Counts each finished reconcile for /metrics.
pub(crate) fn counted<T>(ctx: Arc<Ctx>) -> impl FnMut(T) -> futures::future::Ready<()> {
    move |_| {
        ctx.metrics.reconciles.inc();
        futures::future::ready(())
    }
}

/// Runs a controller of the namespaced kind `K` (a budget, a quota) that is also woken by every
/// change to a pod of its namespace, until SIGTERM or Ctrl-C.
pub(crate) async fn run_woken_by_pods<K, R, Fut>(ctx: Arc<Ctx>, reconcile: R)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    R: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    let ctrl = Controller::new(Api::<K>::all(client.clone()), cfg.clone());
    let objects = ctrl.store();
    ctrl.watches(Api::<Pod>::all(client), cfg, move |pod: Pod| {
        let ns = kube::ResourceExt::namespace(&pod);
        objects
            .state()
            .iter()
            .filter(|o| kube::ResourceExt::namespace(o.as_ref()) == ns)
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect::<Vec<_>>()
    })
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx.clone())
    .for_each(counted(ctx.clone()))
    .await;
}

/// The ReplicaSet and Deployment controllers, each woken by its kind and what it owns.
fn workloads(ctx: &Arc<Ctx>) -> impl Future<Output = ((), ())> {
    let client = &ctx.client;
    let cfg = watcher::Config::default();
    let rs = Controller::new(Api::<ReplicaSet>::all(client.clone()), cfg.clone())
        .owns(Api::<Pod>::all(client.clone()), cfg.clone())
        .shutdown_on_signal()
        .run(replicaset::reconcile, error_policy, ctx.clone())
        .for_each(counted(ctx.clone()));
    let deploy = Controller::new(Api::<Deployment>::all(client.clone()), cfg.clone())
        .owns(Api::<ReplicaSet>::all(client.clone()), cfg)
        .shutdown_on_signal()
        .run(deployment::reconcile, error_policy, ctx.clone())
        .for_each(counted(ctx.clone()));
    futures::future::join(rs, deploy)
}

/// The EndpointSlice controller, woken by Services, their slices, and Pods they select.
fn endpoint_slices(ctx: &Arc<Ctx>) -> impl Future<Output = ()> {
    let client = &ctx.client;
    let cfg = watcher::Config::default();
    let svc_ctrl = Controller::new(Api::<Service>::all(client.clone()), cfg.clone());
    let services = svc_ctrl.store();
    svc_ctrl
        .owns(Api::<EndpointSlice>::all(client.clone()), cfg.clone())
        .watches(Api::<Pod>::all(client.clone()), cfg, move |pod: Pod| {
            services
                .state()
                .iter()
                .filter(|s| endpointslice::selects(s, &pod))
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect::<Vec<_>>()
        })
        .shutdown_on_signal()
        .run(endpointslice::reconcile, error_policy, ctx.clone())
        .for_each(counted(ctx.clone()))
}

/// The garbage collector, then the namespace controller, once `every` interval, until aborted.
async fn sweeps(ctx: Arc<Ctx>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    let mut resources = gc::Resources::default();
    loop {
        tick.tick().await;
        if let Err(e) = gc::sweep(&ctx.client, &mut resources).await {
            tracing::warn!(error = %e, "garbage collection sweep failed");
        }
        if let Err(e) = namespace::sweep(&ctx.client).await {
            tracing::warn!(error = %e, "namespace sweep failed");
        }
    }
}

/// What the node IPAM, load-balancer IP and certificate controllers run with.
#[derive(Default)]
pub struct Optional {
    /// `--allocate-node-cidrs`: the blocks of `--cluster-cidr` handed to Nodes.
    pub node_ipam: Option<nodeipam::CidrSet>,
    /// `--load-balancer-ip-range`: the addresses handed to Services of type LoadBalancer.
    pub load_balancer_pool: Option<loadbalancer::Pool>,
    /// `--cluster-signing-cert-file` and `-key-file`: csrsigning issues with this CA (without
    /// them only csrapproving runs).
    pub csr_signing: Option<certificates::Signer>,
    /// `--root-ca-file`'s PEM: the root-CA publisher writes it into every namespace.
    pub root_ca: Option<String>,
}

/// Starts node IPAM and load-balancer IP allocation (when asked for) and the CSR controllers; each stops on SIGTERM or Ctrl-C.
fn spawn_optional(ctx: &Arc<Ctx>, optional: Optional) -> Vec<tokio::task::JoinHandle<()>> {
    let csr = certificates::run(ctx.clone(), optional.csr_signing);
    let service_accounts = serviceaccounts::run(ctx.clone());
    let mut tasks = vec![tokio::spawn(csr), tokio::spawn(service_accounts)];
    match optional.root_ca {
        Some(pem) => tasks.push(tokio::spawn(root_ca_publisher::run(ctx.clone(), pem))),
        None => tracing::info!("no --root-ca-file: kube-root-ca.crt is not published"),
    }
    if let Some(set) = optional.node_ipam {
        let shutdown = keelson_daemon::Shutdown::on_signal();
        tasks.push(tokio::spawn(nodeipam::run(ctx.clone(), set, shutdown)));
    }
    match optional.load_balancer_pool {
        Some(pool) => {
            let shutdown = keelson_daemon::Shutdown::on_signal();
            tasks.push(tokio::spawn(loadbalancer::run(ctx.clone(), pool, shutdown)));
        }
        None => tracing::info!(
            "no --load-balancer-ip-range: Services of type LoadBalancer get no address"
        ),
    }
    tasks
}

/// Runs every controller until SIGTERM or Ctrl-C; with `leader`, only while this process holds
/// that Lease (standing by with /healthz and /metrics until it does).
pub async fn run(
    client: kube::Client,
    metrics_addr: SocketAddr,
    node_lifecycle: nodelifecycle::Config,
    optional: Optional,
    leader: Option<keelson_daemon::leader::Config>,
) -> Result<(), Error> {
    let events = keelson_daemon::events::Recorder::new(
        client.clone(),
        keelson_daemon::events::Reporter {
            component: "kube-controller-manager".into(),
            host: None,
        },
    );
    let elector = leader.map(|c| keelson_daemon::leader::Elector::new(client.clone(), c));
    let ctx = Arc::new(Ctx {
        client,
        metrics: metrics::Metrics::default(),
        events,
    });
    let mut health = keelson_daemon::ready_now();
    if let Some(e) = &elector {
        health = health.with_metrics(e.registry());
    }
    let server = tokio::spawn(keelson_daemon::serve_health_and_metrics(
        metrics_addr,
        ctx.metrics.registry.clone(),
        health,
    ));
    let controllers = run_controllers(ctx, node_lifecycle, optional);
    let result = match elector {
        None => {
            controllers.await;
            Ok(())
        }
        Some(e) => e
            .lead(&keelson_daemon::Shutdown::on_signal(), controllers)
            .await
            .map(|_| ())
            .map_err(Error::from),
    };
    server.abort();
    result
}

async fn run_controllers(ctx: Arc<Ctx>, node_lifecycle: nodelifecycle::Config, optional: Optional) {
    let sweeper = tokio::spawn(sweeps(ctx.clone(), Duration::from_secs(1)));
    tracing::info!(
        "controllers running: deployment, replicaset, endpointslice, garbage collector, namespace, node lifecycle, daemonset, statefulset, job, cronjob, serviceaccount, horizontal-pod-autoscaler, disruption, resourcequota"
    );
    let nodes = nodelifecycle::run(
        ctx.clone(),
        node_lifecycle,
        keelson_daemon::Shutdown::on_signal(),
    );
    let optional = spawn_optional(&ctx, optional);
    let daemons = daemonset::run(ctx.clone());
    let batch = tokio::spawn(futures::future::join(
        job::run(ctx.clone()),
        cronjob::run(ctx.clone()),
    ));
    let storage = tokio::spawn(volume::run(ctx.clone()));
    let stateful = statefulset::run(ctx.clone());
    let autoscaling = tokio::spawn(hpa::run(ctx.clone()));
    let disruption = tokio::spawn(disruption::run(ctx.clone()));
    let quotas = tokio::spawn(resourcequota::run(ctx.clone()));
    // Aborted also when this future is dropped (leadership lost): nothing acts on after.
    let mut tasks: Vec<_> = optional.iter().map(|t| t.abort_handle()).collect();
    tasks.extend([
        storage.abort_handle(),
        autoscaling.abort_handle(),
        disruption.abort_handle(),
        quotas.abort_handle(),
        batch.abort_handle(),
        sweeper.abort_handle(),
    ]);
    let _tasks = AbortOnDrop(tasks);
    futures::join!(
        workloads(&ctx),
        endpoint_slices(&ctx),
        nodes,
        daemons,
        stateful
    );
    tracing::info!("controllers stopped");
}

/// Background tasks that end with their owner.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}
