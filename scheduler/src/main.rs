use clap::Parser;

/// Keelson's scheduler: binds Pods with no node to a node (filter, score, bind).
#[derive(Parser)]
#[command(name = "keelson-scheduler", version)]
struct Opts {
    /// Kubeconfig of the cluster (default: $KUBECONFIG, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Where /healthz and /metrics are served.
    #[arg(long, default_value = "127.0.0.1:10259")]
    metrics_bind_address: std::net::SocketAddr,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): profiles, plugins and
    /// their weights, percentageOfNodesToScore. Without it, upstream's default profile.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    leader: keelson_daemon::leader::Flags,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = Opts::parse();
    let profiles = match &opts.config {
        Some(path) => keelson_scheduler::config::load(path)
            .map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?,
        None => vec![keelson_scheduler::config::Profile::default()],
    };
    let leader = opts.leader.config("kube-scheduler")?;
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    keelson_scheduler::run(client, opts.metrics_bind_address, leader, profiles).await?;
    Ok(())
}
