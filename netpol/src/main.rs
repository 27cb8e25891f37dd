//! keelson-netpol: flags in, library out.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use keelson_netpol::app::{self, Options};

#[derive(Parser)]
#[command(
    name = "keelson-netpol",
    about = "Keelson NetworkPolicy enforcement on this node (nftables)"
)]
struct Flags {
    #[command(flatten)]
    node: keelson_daemon::NodeFlags,
    #[arg(long, default_value = "127.0.0.1:10262")]
    metrics_bind_address: SocketAddr,
    /// Batch the changes of this long into one load.
    #[arg(long, default_value = "100ms")]
    min_sync_period: String,
    /// Recompile this often even without changes.
    #[arg(long, default_value = "30s")]
    sync_period: String,
    /// Rewrite the whole table this often.
    #[arg(long, default_value = "5m")]
    full_sync_period: String,
    /// Testing only: load rules inside this network namespace (e.g. /var/run/netns/NAME).
    #[arg(long)]
    netns: Option<PathBuf>,
}

fn duration(flag: &str, s: &str) -> anyhow::Result<std::time::Duration> {
    keelson_apimachinery::parse_duration(s).with_context(|| format!("--{flag}"))
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
        metrics_bind: f.metrics_bind_address,
        min_sync_period: duration("min-sync-period", &f.min_sync_period)?,
        sync_period: duration("sync-period", &f.sync_period)?,
        full_sync_period: duration("full-sync-period", &f.full_sync_period)?,
        netns: f.netns,
    };
    app::run(opts).await?;
    Ok(())
}
