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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let opts = Opts::parse();
    let config = match &opts.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    keelson_scheduler::run(kube::Client::try_from(config)?, opts.metrics_bind_address).await
}
