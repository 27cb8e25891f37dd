use clap::Parser;

/// Keelson's controller manager: deployment, replicaset, endpointslice, garbage collector, namespace.
#[derive(Parser)]
#[command(name = "keelson-controller-manager", version)]
struct Opts {
    /// Kubeconfig of the cluster (default: $KUBECONFIG, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Where /healthz and /metrics are served.
    #[arg(long, default_value = "127.0.0.1:10257")]
    metrics_bind_address: std::net::SocketAddr,
    /// How often node health is checked (and NoExecute taints acted on).
    #[arg(long, default_value = "5s", value_parser = keelson_apimachinery::parse_duration)]
    node_monitor_period: std::time::Duration,
    /// How long a node's Lease may go unrenewed before the node is marked Unknown.
    #[arg(long, default_value = "40s", value_parser = keelson_apimachinery::parse_duration)]
    node_monitor_grace_period: std::time::Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = Opts::parse();
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let node_lifecycle = keelson_controllers::nodelifecycle::Config {
        monitor_period: opts.node_monitor_period,
        grace_period: opts.node_monitor_grace_period,
    };
    keelson_controllers::run(client, opts.metrics_bind_address, node_lifecycle).await?;
    Ok(())
}
