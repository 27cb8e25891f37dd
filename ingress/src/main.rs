//! keelson-ingress: flags in, controller out.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use keelson_daemon::SyncLoop;
use keelson_ingress::controller::{self, Options};
use keelson_ingress::render::RenderOptions;

#[derive(Parser)]
#[command(
    name = "keelson-ingress",
    about = "Keelson ingress controller (Ingresses to nginx)"
)]
struct Flags {
    /// Path to a kubeconfig; default: in-cluster or $KUBECONFIG.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Handle Ingresses whose IngressClass has this spec.controller.
    #[arg(long, default_value = "keelson.dev/ingress-nginx")]
    controller_class: String,
    /// Port nginx listens on for HTTP.
    #[arg(long, default_value_t = 80)]
    http_port: u16,
    /// Port nginx listens on for HTTPS (hosts with a spec.tls Secret).
    #[arg(long, default_value_t = 443)]
    https_port: u16,
    /// Address nginx listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// nginx's configuration, pid, logs and temp files.
    #[arg(long, default_value = "/var/lib/keelson/ingress")]
    conf_dir: PathBuf,
    /// IP written into each handled Ingress's status.loadBalancer.ingress.
    #[arg(long)]
    publish_address: Option<IpAddr>,
    /// Serves /healthz and /metrics.
    #[arg(long, default_value = "127.0.0.1:10254")]
    metrics_bind_address: SocketAddr,
    /// The nginx binary.
    #[arg(long, default_value = "nginx")]
    nginx: PathBuf,
    #[command(flatten)]
    leader: keelson_daemon::leader::Flags,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let f = Flags::parse();
    std::fs::create_dir_all(&f.conf_dir)
        .with_context(|| format!("--conf-dir: cannot create {}", f.conf_dir.display()))?;
    // nginx resolves relative paths against its own prefix; give it an absolute one.
    let conf_dir = std::fs::canonicalize(&f.conf_dir)
        .with_context(|| format!("--conf-dir: {}", f.conf_dir.display()))?;
    let leader = f.leader.config("keelson-ingress")?;
    let opts = Options {
        kubeconfig: f.kubeconfig,
        controller_class: f.controller_class,
        publish_address: f.publish_address,
        metrics_bind: f.metrics_bind_address,
        render: RenderOptions {
            bind_address: f.bind_address,
            http_port: f.http_port,
            https_port: f.https_port,
            conf_dir,
        },
        nginx_binary: f.nginx,
        sync: SyncLoop {
            debounce: Duration::from_millis(100),
            resync: Duration::from_secs(10),
        },
        leader,
    };
    controller::run(opts).await?;
    Ok(())
}
