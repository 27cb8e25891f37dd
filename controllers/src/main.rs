use clap::Parser;
use keelson_controllers::certificates::Signer;
use keelson_controllers::loadbalancer::Pool;
use keelson_controllers::nodeipam::CidrSet;

/// Keelson's controller manager: deployment, replicaset, daemonset, endpointslice, garbage
/// collector, namespace, node lifecycle, node IPAM, load-balancer IPs, CSR approving and signing.
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
    /// Give each Node a pod CIDR (spec.podCIDR) out of --cluster-cidr.
    #[arg(long)]
    allocate_node_cidrs: bool,
    /// The range pod CIDRs are allocated from.
    #[arg(long, default_value = "10.244.0.0/16")]
    cluster_cidr: ipnetwork::IpNetwork,
    /// The prefix length of each Node's pod CIDR.
    #[arg(long, default_value_t = 24)]
    node_cidr_mask_size: u8,
    /// Addresses handed to Services of type LoadBalancer (status.loadBalancer.ingress):
    /// comma-separated A-B ranges or CIDRs, e.g. 192.168.1.240-192.168.1.250. Without it such
    /// Services stay <pending>, as upstream without a cloud provider.
    #[arg(long)]
    load_balancer_ip_range: Option<Pool>,
    /// PEM CA certificate that csrsigning issues client certificates with (the API server's
    /// <data-dir>/ca.crt); without it and the key, CSRs are approved but not signed.
    #[arg(long, requires = "cluster_signing_key_file")]
    cluster_signing_cert_file: Option<std::path::PathBuf>,
    /// PEM private key of --cluster-signing-cert-file (the API server's <data-dir>/ca.key).
    #[arg(long, requires = "cluster_signing_cert_file")]
    cluster_signing_key_file: Option<std::path::PathBuf>,
    /// The longest validity of a signed certificate (a CSR's spec.expirationSeconds may ask
    /// for less).
    #[arg(long, default_value = "8760h", value_parser = keelson_apimachinery::parse_duration)]
    cluster_signing_duration: std::time::Duration,
    /// PEM CA bundle published as ConfigMap kube-root-ca.crt in every namespace (the API
    /// server's <data-dir>/ca.crt), for pods to verify the API server.
    #[arg(long)]
    root_ca_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    leader: keelson_daemon::leader::Flags,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    let opts = Opts::parse();
    // Flags are checked before connecting, so a bad one fails at once.
    let optional = keelson_controllers::Optional {
        node_ipam: opts
            .allocate_node_cidrs
            .then(|| CidrSet::new(opts.cluster_cidr, opts.node_cidr_mask_size))
            .transpose()?,
        load_balancer_pool: opts.load_balancer_ip_range,
        csr_signing: match (
            &opts.cluster_signing_cert_file,
            &opts.cluster_signing_key_file,
        ) {
            (Some(cert), Some(key)) => Some(Signer::from_files(
                cert,
                key,
                opts.cluster_signing_duration,
            )?),
            _ => None,
        },
        root_ca: match &opts.root_ca_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("--root-ca-file {}: {e}", path.display()))?,
            ),
            None => None,
        },
    };
    let leader = opts.leader.config("kube-controller-manager")?;
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let node_lifecycle = keelson_controllers::nodelifecycle::Config {
        monitor_period: opts.node_monitor_period,
        grace_period: opts.node_monitor_grace_period,
    };
    keelson_controllers::run(
        client,
        opts.metrics_bind_address,
        node_lifecycle,
        optional,
        leader,
    )
    .await?;
    Ok(())
}
