//! keelson-dns: flags (CoreDNS's and kube-dns's names where they have one) in, library out.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use keelson_dns::app::{self, Options};

#[derive(Parser)]
#[command(
    name = "keelson-dns",
    about = "Keelson cluster DNS (Services and EndpointSlices to DNS records)"
)]
struct Flags {
    /// Path to a kubeconfig; default: in-cluster or $KUBECONFIG.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The cluster's DNS domain: Services are <svc>.<ns>.svc.<domain>.
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
    /// Address to answer on, UDP and TCP.
    #[arg(long, default_value = "0.0.0.0:53")]
    listen: SocketAddr,
    /// Port for /healthz, /readyz and /metrics (CoreDNS's health plugin: 8080).
    #[arg(long, default_value_t = 8080)]
    health_port: u16,
    /// Address for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "127.0.0.1")]
    health_address: std::net::IpAddr,
    /// Where names outside the cluster domain go (ADDR or ADDR:PORT); without it they are refused.
    #[arg(long)]
    upstream: Option<String>,
    /// TTL of the answers, in seconds (and the SOA's negative-caching TTL).
    #[arg(long, default_value_t = 30)]
    ttl: u32,
}

fn upstream(flag: Option<String>) -> anyhow::Result<Option<SocketAddr>> {
    let Some(s) = flag else { return Ok(None) };
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(Some(addr));
    }
    let ip: std::net::IpAddr = s
        .parse()
        .map_err(|_| anyhow::anyhow!("invalid --upstream {s:?}: want ADDR or ADDR:PORT"))?;
    Ok(Some(SocketAddr::new(ip, 53)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let f = Flags::parse();
    let opts = Options {
        kubeconfig: f.kubeconfig,
        cluster_domain: f.cluster_domain,
        listen: f.listen,
        health: SocketAddr::new(f.health_address, f.health_port),
        upstream: upstream(f.upstream)?,
        ttl: f.ttl,
    };
    app::run(opts).await?;
    Ok(())
}
