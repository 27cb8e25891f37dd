//! Wiring: options -> backend, proxier, watches, metrics server and the sync loop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keelson_daemon::{Changes, Shutdown};

use crate::backend::RuleBackend;
use crate::cidr::Ipv4Cidr;
use crate::error::ProxyError;
use crate::exec::{CommandRunner, Runner};
use crate::iptables::{self, IptablesBackend, Variant};
use crate::metrics::Metrics;
use crate::nftables::{self, NftBackend};
use crate::proxier::Proxier;
use crate::sync_loop::{run_sync_loop, LoopConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    Iptables,
    Nftables,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IptablesVariant {
    Auto,
    Nft,
    Legacy,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub kubeconfig: Option<PathBuf>,
    pub node_name: String,
    pub mode: ProxyMode,
    pub iptables_variant: IptablesVariant,
    pub cluster_cidr: Option<Ipv4Cidr>,
    pub metrics_bind: SocketAddr,
    pub healthz_bind: Option<SocketAddr>,
    pub min_sync_period: Duration,
    pub sync_period: Duration,
    /// Test hook: run every rule command inside this network namespace.
    pub netns: Option<PathBuf>,
    /// `--announce-load-balancers`: answer ARP for the LoadBalancer addresses this node wins.
    pub announce: Option<crate::announce::Config>,
}

fn runner(netns: &Option<PathBuf>) -> Result<Box<dyn Runner>, ProxyError> {
    Ok(match netns {
        Some(p) => Box::new(CommandRunner::in_netns(p)?),
        None => Box::new(CommandRunner::host()),
    })
}

/// Builds the backend chosen by `--proxy-mode`.
pub fn make_backend(
    mode: ProxyMode,
    variant: IptablesVariant,
    cluster_cidr: Option<Ipv4Cidr>,
    netns: &Option<PathBuf>,
) -> Result<Box<dyn RuleBackend>, ProxyError> {
    Ok(match mode {
        ProxyMode::Iptables => {
            let r = runner(netns)?;
            let variant = match variant {
                IptablesVariant::Nft => Variant::Nft,
                IptablesVariant::Legacy => Variant::Legacy,
                IptablesVariant::Auto => iptables::detect_variant(r.as_ref()),
            };
            tracing::info!(?variant, "iptables backend");
            Box::new(IptablesBackend::new(
                r,
                variant,
                iptables::render::RenderOptions { cluster_cidr },
            ))
        }
        ProxyMode::Nftables => Box::new(NftBackend::new(
            runner(netns)?,
            nftables::render::RenderOptions { cluster_cidr },
        )),
    })
}

async fn bind(addr: SocketAddr, what: &str) -> Result<tokio::net::TcpListener, ProxyError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ProxyError::Config {
            option: what.to_string(),
            detail: format!("cannot listen on {addr}: {e}"),
        })
}

/// Serves /healthz, /readyz and /metrics on `listener`; a failure is logged (rules do not depend on it).
async fn serve(
    health: keelson_daemon::Health,
    listener: tokio::net::TcpListener,
    registry: Arc<prometheus_client::registry::Registry>,
) {
    if let Err(e) = health.serve_on(listener, registry).await {
        tracing::warn!(error = %e, "health and metrics endpoint stopped");
    }
}

/// Runs the proxy until SIGTERM or SIGINT (the rules stay in place, as kube-proxy leaves them).
pub async fn run(opts: Options) -> Result<(), ProxyError> {
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let shutdown = Shutdown::on_signal();

    let stale_after = opts
        .sync_period
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(10));
    let metrics = Arc::new(Metrics::new(stale_after));
    let listener = bind(opts.metrics_bind, "--metrics-bind-address").await?;
    let m = metrics.clone();
    let health = keelson_daemon::Health::with_liveness(move || m.health());
    // Ready from the start, as kube-proxy: /healthz is what says whether rules are being written.
    health.set_ready(true);
    tokio::spawn(serve(health.clone(), listener, metrics.registry()));
    if let Some(addr) = opts.healthz_bind {
        let listener = bind(addr, "--healthz-bind-address").await?;
        tokio::spawn(serve(health, listener, metrics.registry()));
    }

    let backend = make_backend(
        opts.mode,
        opts.iptables_variant,
        opts.cluster_cidr,
        &opts.netns,
    )?;
    let proxier = Proxier::new(backend, Some(runner(&opts.netns)?), metrics.clone());
    let changes = Changes::default();
    let inputs = Arc::new(crate::inputs::start(
        client.clone(),
        &opts.node_name,
        &changes,
        opts.announce.is_some(),
    ));
    let speaker = opts.announce.clone().map(|cfg| {
        tokio::spawn(crate::announce::run(
            client,
            opts.node_name.clone(),
            inputs.clone(),
            cfg,
            shutdown.clone(),
            metrics.clone(),
        ))
    });
    let cfg = LoopConfig {
        min_sync_period: opts.min_sync_period,
        sync_period: opts.sync_period,
        ..LoopConfig::default()
    };
    tracing::info!(node = %opts.node_name, mode = ?opts.mode, "keelson-proxy starting");
    run_sync_loop(proxier, inputs, changes, cfg, shutdown).await;
    if let Some(speaker) = speaker {
        // It stops answering and hands its addresses over before the process exits.
        let _ = speaker.await;
    }
    Ok(())
}

/// Parses "1s", "500ms", "2m" (kube-proxy's duration flags).
pub fn parse_duration(s: &str) -> Result<Duration, ProxyError> {
    keelson_apimachinery::parse_duration(s).map_err(|e| ProxyError::Config {
        option: "duration".into(),
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse_duration("2562047h").unwrap(),
            Duration::from_secs(2562047 * 3600)
        );
        for out_of_range in ["2562048h", "99999999999999999999999h"] {
            assert!(parse_duration(out_of_range).is_err(), "{out_of_range}");
        }
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("1d").is_err());
    }
}
