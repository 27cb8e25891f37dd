//! keelson-proxy: flags (kube-proxy's names) in, library out.

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use keelson_proxy::app::{self, IptablesVariant, Options, ProxyMode};

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Iptables,
    Nftables,
}

#[derive(Clone, Copy, ValueEnum)]
enum VariantFlag {
    Auto,
    Nft,
    Legacy,
}

#[derive(Parser)]
#[command(
    name = "keelson-proxy",
    about = "Keelson service proxy (Services to NAT rules)"
)]
struct Flags {
    #[command(flatten)]
    node: keelson_daemon::NodeFlags,
    #[arg(long, value_enum, default_value = "iptables")]
    proxy_mode: Mode,
    /// Which iptables implementation to use in iptables mode.
    #[arg(long, value_enum, default_value = "auto")]
    iptables_variant: VariantFlag,
    /// Pod network range; traffic to a cluster IP from outside it is masqueraded.
    #[arg(long)]
    cluster_cidr: Option<String>,
    #[arg(long, default_value = "127.0.0.1:10249")]
    metrics_bind_address: SocketAddr,
    /// Also serve /healthz here.
    #[arg(long)]
    healthz_bind_address: Option<SocketAddr>,
    /// Batch changes: at most one sync per this period.
    #[arg(long, default_value = "1s")]
    min_sync_period: String,
    /// Full resync period.
    #[arg(long, default_value = "30s")]
    sync_period: String,
    /// Testing only: write rules inside this network namespace (e.g. /var/run/netns/NAME).
    #[arg(long)]
    netns: Option<PathBuf>,
    /// Announce the LoadBalancer addresses this node is elected for on its segment (ARP), as
    /// MetalLB's layer-2 mode: one node per address, another within seconds when it fails.
    #[arg(long)]
    announce_load_balancers: bool,
    /// The interface to announce on (default: the one holding the node's InternalIP).
    #[arg(long, requires = "announce_load_balancers")]
    announce_interface: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let f = Flags::parse();
    let node_name = keelson_daemon::node_name(f.node.hostname_override)
        .context("reading the hostname; pass --hostname-override")?;
    let opts = Options {
        kubeconfig: f.node.kubeconfig,
        node_name,
        mode: match f.proxy_mode {
            Mode::Iptables => ProxyMode::Iptables,
            Mode::Nftables => ProxyMode::Nftables,
        },
        iptables_variant: match f.iptables_variant {
            VariantFlag::Auto => IptablesVariant::Auto,
            VariantFlag::Nft => IptablesVariant::Nft,
            VariantFlag::Legacy => IptablesVariant::Legacy,
        },
        cluster_cidr: f.cluster_cidr.map(|c| c.parse()).transpose()?,
        metrics_bind: f.metrics_bind_address,
        healthz_bind: f.healthz_bind_address,
        min_sync_period: app::parse_duration(&f.min_sync_period)?,
        sync_period: app::parse_duration(&f.sync_period)?,
        netns: f.netns,
        announce: f
            .announce_load_balancers
            .then_some(keelson_proxy::announce::Config {
                interface: f.announce_interface,
            }),
    };
    app::run(opts).await?;
    Ok(())
}
