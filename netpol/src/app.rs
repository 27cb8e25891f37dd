//! Wiring: watches on pods, namespaces and policies, the debounced sync loop, /metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use keelson_daemon::{reflect, Changes, Health, Shutdown, SyncLoop};
use kube::runtime::watcher;
use kube::Api;
use prometheus_client::registry::Registry;

use crate::compile::{compile, Compiled};
use crate::from_k8s::{namespace_info, pod_info};
use crate::metrics::{Metrics, SyncLabels};
use crate::nft::{Nft, NftCli, NftError};
use crate::ruleset::{render_diff, render_full, Ruleset};

#[derive(Debug, Clone)]
pub struct Options {
    pub kubeconfig: Option<PathBuf>,
    pub node_name: String,
    pub metrics_bind: SocketAddr,
    /// Batch the changes of this long into one load.
    pub min_sync_period: Duration,
    /// Recompile this often without changes.
    pub sync_period: Duration,
    /// Rewrite the whole table this often (repairs rules changed by hand).
    pub full_sync_period: Duration,
    /// Test hook: load the rules inside this network namespace.
    pub netns: Option<PathBuf>,
}

/// How long the inputs may stay unlisted before the daemon says which (and again after as long).
const UNLISTED_WARNING: Duration = Duration::from_secs(10);

/// Loads compiled rulesets: the difference from the last one when it is known to be in the
/// kernel, else (first load, after a failure, periodically) the whole table.
pub struct Syncer {
    nft: Box<dyn Nft>,
    metrics: Arc<Metrics>,
    loaded: Option<Ruleset>,
    last_full: Instant,
    full_every: Duration,
    problems: Vec<String>,
}

impl Syncer {
    pub fn new(nft: Box<dyn Nft>, metrics: Arc<Metrics>, full_every: Duration) -> Syncer {
        Syncer {
            nft,
            metrics,
            loaded: None,
            last_full: Instant::now(),
            full_every,
            problems: Vec::new(),
        }
    }

    /// Loads `c`; true when anything was written.
    pub fn sync(&mut self, c: Compiled) -> Result<bool, NftError> {
        if c.problems != self.problems {
            for p in &c.problems {
                tracing::warn!(problem = %p, "policy part left out (it allows nothing)");
            }
            self.problems = c.problems;
        }
        self.metrics.problems.set(self.problems.len() as i64);
        let start = Instant::now();
        let full = self.loaded.is_none() || self.last_full.elapsed() >= self.full_every;
        let script = match (&self.loaded, full) {
            (Some(old), false) => match render_diff(old, &c.ruleset) {
                Some(s) => s,
                None => return Ok(false),
            },
            _ => render_full(&c.ruleset),
        };
        let result = self.nft.load(&script);
        let labels = SyncLabels {
            kind: if full { "full" } else { "incremental" }.into(),
            result: if result.is_ok() { "ok" } else { "error" }.into(),
        };
        self.metrics.syncs.get_or_create(&labels).inc();
        self.metrics
            .sync_seconds
            .observe(start.elapsed().as_secs_f64());
        match result {
            Ok(()) => {
                if full {
                    self.last_full = Instant::now();
                }
                self.metrics.rules.set(c.ruleset.rule_count() as i64);
                self.metrics
                    .set_elements
                    .set(c.ruleset.element_count() as i64);
                self.loaded = Some(c.ruleset);
                Ok(true)
            }
            Err(e) => {
                // The kernel's table is unknown now: the next load writes all of it.
                self.loaded = None;
                Err(e)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
}

/// Runs until SIGTERM or SIGINT. The rules stay in place (pods keep their isolation while the
/// daemon restarts); with no policies left the table is removed.
pub async fn run(opts: Options) -> Result<(), AppError> {
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let shutdown = Shutdown::on_signal();
    let changes = Changes::default();
    let all = watcher::Config::default();
    let pods = reflect(Api::<Pod>::all(client.clone()), all.clone(), &changes);
    let namespaces = reflect(Api::<Namespace>::all(client.clone()), all.clone(), &changes);
    let policies = reflect(Api::<NetworkPolicy>::all(client), all, &changes);

    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::new(&mut registry));
    let health = Health::default();
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        opts.metrics_bind,
        Arc::new(registry),
        health.clone(),
    ));
    // Nothing is written before every input was listed: a partial view would open or close
    // paths that policy says otherwise about.
    let listed = async { tokio::join!(pods.synced(), namespaces.synced(), policies.synced()) };
    tokio::pin!(listed);
    let mut waiting = tokio::time::interval_at(
        tokio::time::Instant::now() + UNLISTED_WARNING,
        UNLISTED_WARNING,
    );
    loop {
        tokio::select! {
            _ = &mut listed => break,
            _ = shutdown.requested() => return Ok(()),
            _ = waiting.tick() => {
                let unlisted: Vec<&str> = [
                    ("Pods", pods.is_synced()),
                    ("Namespaces", namespaces.is_synced()),
                    ("NetworkPolicies", policies.is_synced()),
                ]
                .into_iter()
                .filter_map(|(kind, synced)| (!synced).then_some(kind))
                .collect();
                tracing::warn!(
                    not_listed = %unlisted.join(", "),
                    "keelson-netpol writes no rule until it has listed Pods, Namespaces and \
                     NetworkPolicies (list and watch on each, cluster-wide): a partial view could \
                     open paths that policy closes"
                );
            }
        }
    }
    tracing::info!(node = %opts.node_name, "keelson-netpol: inputs listed, syncing");
    let nft = Box::new(NftCli {
        netns: opts.netns.clone(),
    });
    let mut syncer = Syncer::new(nft, metrics.clone(), opts.full_sync_period);
    let lp = SyncLoop {
        debounce: opts.min_sync_period,
        resync: opts.sync_period,
    };
    lp.run(&changes, &shutdown, || {
        let pods: Vec<_> = pods.state().iter().filter_map(|p| pod_info(p)).collect();
        let nss: Vec<_> = namespaces
            .state()
            .iter()
            .map(|n| namespace_info(n))
            .collect();
        // The store's own Arcs: compiling borrows them, nothing is copied per sync.
        let pols = policies.state();
        metrics.policies.set(pols.len() as i64);
        match syncer.sync(compile(&opts.node_name, &pols, &pods, &nss)) {
            Ok(wrote) => {
                health.set_ready(true);
                if wrote {
                    tracing::debug!(policies = pols.len(), "policy rules loaded");
                }
            }
            Err(e) => tracing::warn!(error = %e, "loading policy rules failed; retrying in full"),
        }
        std::future::ready(())
    })
    .await;
    tracing::info!("keelson-netpol stopped");
    Ok(())
}
