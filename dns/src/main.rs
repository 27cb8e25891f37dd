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
    /// Where names outside the cluster domain go, comma separated and asked in turn: ADDR,
    /// ADDR:PORT, or a resolv.conf whose nameservers are used (/etc/resolv.conf: the node's,
    /// as CoreDNS's `forward . /etc/resolv.conf`). Without it they are refused.
    #[arg(long, value_delimiter = ',')]
    upstream: Vec<String>,
    /// The longest a forwarded answer (or denial) is cached, in seconds; 0: no cache
    /// (CoreDNS's `cache 30`).
    #[arg(long, default_value_t = 30)]
    cache_max_ttl: u32,
    /// TTL of the answers, in seconds (and the SOA's negative-caching TTL).
    #[arg(long, default_value_t = 30)]
    ttl: u32,
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
        upstreams: keelson_dns::forward::resolv::upstreams(&f.upstream, f.listen)
            .map_err(anyhow::Error::msg)?,
        cache_max_ttl: f.cache_max_ttl,
        ttl: f.ttl,
    };
    app::run(opts).await?;
    Ok(())
}
