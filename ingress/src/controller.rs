//! The watch loop: informers fill stores, any change wakes one debounced sync, a sync renders
//! the whole config, loads it through nginx when the text changed, and writes Ingress status.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use keelson_daemon::{reflect, Changes, Objects, Shutdown, SyncLoop};
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Mutex;

use crate::error::{IngressError, NginxError};
use crate::events::IngressEvents;
use crate::isolate::{Key, Trial, Verdicts};
use crate::metrics::Metrics;
use crate::model::{self, key, Inputs, Model, Rejection};
use crate::nginx::NginxProcess;
use crate::render::{self, RenderOptions};
use crate::tls::Cert;
use crate::worker::NginxWorker;

pub struct Options {
    pub kubeconfig: Option<PathBuf>,
    pub controller_class: String,
    pub publish_address: Option<IpAddr>,
    pub metrics_bind: SocketAddr,
    pub render: RenderOptions,
    pub nginx_binary: PathBuf,
    /// Bursts of changes within `debounce` give one sync; the `resync` period retries failed
    /// status writes and restarts a dead nginx.
    pub sync: SyncLoop,
    /// With an election, only the replica holding this Lease writes Ingress status; every
    /// replica serves traffic with nginx.
    pub leader: Option<keelson_daemon::leader::Config>,
}

struct Stores {
    ingresses: Objects<Ingress>,
    classes: Objects<IngressClass>,
    services: Objects<Service>,
    slices: Objects<EndpointSlice>,
    secrets: Objects<Secret>,
}

impl Stores {
    /// One informer per kind the model reads, each waking the sync loop on any event.
    fn reflect(client: &Client, changes: &Changes) -> Stores {
        let all = watcher::Config::default;
        Stores {
            ingresses: reflect(Api::all(client.clone()), all(), changes),
            classes: reflect(Api::all(client.clone()), all(), changes),
            services: reflect(Api::all(client.clone()), all(), changes),
            slices: reflect(Api::all(client.clone()), all(), changes),
            secrets: reflect(Api::all(client.clone()), all(), changes),
        }
    }

    async fn synced(&self) {
        tokio::join!(
            self.ingresses.synced(),
            self.classes.synced(),
            self.services.synced(),
            self.slices.synced(),
            self.secrets.synced(),
        );
    }

    fn inputs(&self) -> Inputs {
        Inputs {
            ingresses: self.ingresses.state(),
            classes: self.classes.state(),
            services: self.services.state(),
            slices: self.slices.state(),
            secrets: self.secrets.state(),
        }
    }
}

/// Runs until SIGTERM or SIGINT, then stops nginx and returns.
pub async fn run(opts: Options) -> Result<(), IngressError> {
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::default());
    let elector = opts
        .leader
        .clone()
        .map(|c| keelson_daemon::leader::Elector::new(client.clone(), c));
    let mut health = keelson_daemon::Health::default();
    if let Some(e) = &elector {
        health = health.with_metrics(e.registry());
    }
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        opts.metrics_bind,
        metrics.registry.clone(),
        health.clone(),
    ));

    let changes = Changes::default();
    let shutdown = Shutdown::on_signal();
    let leading = Arc::new(AtomicBool::new(elector.is_none()));
    let campaign = elector.map(|e| {
        tokio::spawn(campaign(
            e,
            leading.clone(),
            changes.clone(),
            shutdown.clone(),
        ))
    });
    let stores = Stores::reflect(&client, &changes);
    // Rendering before every list is in would drop routes that exist: wait for all of them
    // (and stay stoppable while the API server is unreachable).
    tokio::select! {
        _ = stores.synced() => {}
        _ = shutdown.requested() => return Ok(()),
    }
    tracing::info!("caches synced");
    health.set_ready(true);

    let nginx = NginxWorker::spawn(NginxProcess::new(&opts.nginx_binary, &opts.render.conf_dir));
    // Syncs run one at a time; the lock only lets each sync's future borrow the state.
    let events = IngressEvents::new(client.clone());
    let syncer = Mutex::new(Syncer {
        client,
        opts: &opts,
        nginx: nginx.clone(),
        metrics,
        last_loaded: None,
        rejected: None,
        problems: Vec::new(),
        verdicts: Verdicts::default(),
        reported: BTreeMap::new(),
        events,
        leading,
    });
    let (syncer, stores) = (&syncer, &stores);
    opts.sync
        .run(&changes, &shutdown, || async move {
            syncer.lock().await.run(stores).await
        })
        .await;
    tracing::info!("stopping nginx");
    nginx.stop().await?;
    if let Some(campaign) = campaign {
        // The Lease is released there, so a standby writes status at once.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), campaign).await;
    }
    Ok(())
}

/// Holds the status writer's Lease whenever it can. Losing it stops status writes at once and
/// this replica stands by again, nginx serving on (upstream's components exit instead; here
/// that would also drop this replica's traffic). Released on shutdown.
async fn campaign(
    mut elector: keelson_daemon::leader::Elector,
    leading: Arc<AtomicBool>,
    changes: Changes,
    shutdown: Shutdown,
) {
    loop {
        if !elector.acquire(&shutdown).await {
            return;
        }
        leading.store(true, Ordering::Relaxed);
        // Write what a previous leader may have left undone now, not at the next resync.
        changes.notify();
        let stopping = tokio::select! {
            _ = elector.hold() => false,
            _ = shutdown.requested() => true,
        };
        leading.store(false, Ordering::Relaxed);
        if stopping {
            elector.release().await;
            return;
        }
    }
}

struct Syncer<'a> {
    client: Client,
    opts: &'a Options,
    nginx: NginxWorker,
    metrics: Arc<Metrics>,
    /// What nginx runs: an unchanged cluster renders it again and nothing is reloaded.
    last_loaded: Option<Rendered>,
    /// The last config `nginx -t` refused: not offered again until the cluster changes.
    rejected: Option<Rendered>,
    /// Logged when they change, so a broken Ingress is reported once, not every sync.
    problems: Vec<String>,
    /// Ingresses `nginx -t` refused on their own; left out until they (or their Secrets) change.
    verdicts: Verdicts,
    /// Ingresses left out, as last reported (an Event and a log line when this changes).
    reported: BTreeMap<Key, Rejection>,
    events: IngressEvents,
    /// Whether this replica writes Ingress status (it holds the Lease, or there is no election).
    leading: Arc<AtomicBool>,
}

/// One complete nginx configuration: the text and the certificate files it refers to.
#[derive(Clone, PartialEq)]
struct Rendered {
    text: String,
    certs: Vec<Cert>,
}

fn rendered_with(model: &Model, opts: &RenderOptions) -> Rendered {
    Rendered {
        text: render::render(model, opts),
        certs: model.certs.clone(),
    }
}

impl Syncer<'_> {
    async fn run(&mut self, stores: &Stores) {
        let inputs = stores.inputs();
        self.verdicts.refresh(&inputs);
        let mut model = self.build(&inputs);
        let config = Some(rendered_with(&model, &self.opts.render));
        if config != self.last_loaded && config != self.rejected {
            // nginx refused the whole: find the Ingresses it refuses, serve the others.
            if self.load(config).await && self.isolate(&inputs, &model.handled).await {
                model = self.build(&inputs);
                let config = Some(rendered_with(&model, &self.opts.render));
                // Often what already runs: the refused Ingress was the only change.
                if config != self.last_loaded {
                    self.load(config).await;
                }
            }
        } else if !self.nginx.running().await {
            tracing::warn!("nginx is not running; starting it again");
            let config = self.last_loaded.clone().or(config);
            self.load(config).await;
        }
        self.report(&inputs, &model);
        let class = &self.opts.controller_class;
        self.events.synced(
            inputs
                .ingresses
                .iter()
                .filter(|i| model::is_handled(i, &inputs.classes, class)),
        );
        if let Some(ip) = self.opts.publish_address {
            if self.leading.load(Ordering::Relaxed) {
                self.write_status(&inputs, &model.handled, ip).await;
            }
        }
    }

    /// The model without the Ingresses nginx refused; those join the ones the value checks
    /// left out in `rejected`.
    fn build(&mut self, inputs: &Inputs) -> Model {
        let class = &self.opts.controller_class;
        let mut model = model::build_only(inputs, class, |k| !self.verdicts.is_bad(k));
        let ours = |r: &Rejection| {
            inputs
                .ingresses
                .iter()
                .any(|i| key(i) == r.ingress && model::is_handled(i, &inputs.classes, class))
        };
        model
            .rejected
            .extend(self.verdicts.rejections().filter(|r| ours(r)));
        model.rejected.sort_by(|a, b| a.ingress.cmp(&b.ingress));
        self.metrics
            .handled_ingresses
            .set(model.handled.len() as i64);
        if model.problems != self.problems {
            for p in &model.problems {
                tracing::warn!("{p}");
            }
            self.problems = model.problems.clone();
        }
        model
    }

    /// Tests the candidates one by one; true when some were found bad (and are now left out).
    async fn isolate(&mut self, inputs: &Inputs, candidates: &[Key]) -> bool {
        let trial = Trial {
            nginx: &self.nginx,
            inputs,
            controller: &self.opts.controller_class,
            render: &self.opts.render,
        };
        match trial.find_bad(candidates).await {
            Ok(bad) => {
                let found = !bad.is_empty();
                for (k, message) in bad {
                    self.verdicts.insert(inputs, k, message);
                }
                found
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot tell which Ingress nginx refuses");
                false
            }
        }
    }

    /// A log line and a Warning Event for each Ingress newly left out (or left out for a new
    /// reason); the count as a metric.
    fn report(&mut self, inputs: &Inputs, model: &Model) {
        let now: BTreeMap<Key, Rejection> = model
            .rejected
            .iter()
            .map(|r| (r.ingress.clone(), r.clone()))
            .collect();
        for (k, r) in &now {
            if self.reported.get(k) == Some(r) {
                continue;
            }
            let ingress = format!("{}/{}", k.0, k.1);
            tracing::warn!(%ingress, reason = r.reason, "left out of the nginx configuration: {}", r.message);
            if let Some(ing) = inputs.ingresses.iter().find(|i| key(i) == *k) {
                self.events.rejected(ing, r);
            }
        }
        for (ns, name) in self.reported.keys().filter(|k| !now.contains_key(*k)) {
            tracing::info!(ingress = %format!("{ns}/{name}"), "no longer left out");
        }
        self.metrics.rejected_ingresses.set(now.len() as i64);
        self.reported = now;
    }

    /// True when nginx refused the configuration (`nginx -t`); other failures (nginx could not
    /// start, I/O) are retried at the next sync.
    async fn load(&mut self, config: Option<Rendered>) -> bool {
        let Some(config) = config else { return false };
        let result = self
            .nginx
            .apply(config.text.clone(), config.certs.clone())
            .await;
        match result {
            Ok(()) => {
                self.metrics.reloads.inc();
                self.last_loaded = Some(config);
                tracing::info!("nginx configuration loaded");
                false
            }
            Err(e) => {
                self.metrics.reload_errors.inc();
                tracing::error!(error = %e, "nginx configuration not loaded");
                let refused = matches!(e, NginxError::Rejected { .. });
                if refused {
                    self.rejected = Some(config);
                }
                refused
            }
        }
    }

    /// Sets status.loadBalancer.ingress to the publish address, only where it differs.
    async fn write_status(&self, inputs: &Inputs, handled: &[(String, String)], ip: IpAddr) {
        let ip = ip.to_string();
        for ing in &inputs.ingresses {
            let (Some(ns), Some(name)) = (&ing.metadata.namespace, &ing.metadata.name) else {
                continue;
            };
            if !handled.iter().any(|(n, m)| n == ns && m == name) {
                continue;
            }
            let current = ing
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref());
            let up_to_date =
                current.is_some_and(|v| v.len() == 1 && v[0].ip.as_deref() == Some(ip.as_str()));
            if up_to_date {
                continue;
            }
            let api: Api<Ingress> = Api::namespaced(self.client.clone(), ns);
            let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => tracing::info!(ingress = %format!("{ns}/{name}"), %ip, "status written"),
                Err(e) => {
                    tracing::warn!(ingress = %format!("{ns}/{name}"), error = %e, "cannot write status; will retry")
                }
            }
        }
    }
}
