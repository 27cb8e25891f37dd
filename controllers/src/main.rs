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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = Opts::parse();
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    keelson_controllers::run(client, opts.metrics_bind_address).await?;
    Ok(())
}
