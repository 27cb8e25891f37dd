//! keelson-agent: parses flags and runs the agent.

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "keelson-agent",
    version,
    about = "Keelson's node agent (a kubelet driving containerd over CRI)",
    after_help = "keelson-agent load-balancer --help: the client-side load balancer for several API servers"
)]
struct Flags {
    /// Path to the kubeconfig used to reach the API server. With --bootstrap-kubeconfig, the
    /// agent writes it (client certificate in --cert-dir) when it is missing or its client
    /// certificate is unreadable or expired.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// A kubeconfig with a bootstrap token, used only to request the node's client certificate
    /// (a CertificateSigningRequest for system:node:<node>, approved and signed by the
    /// controller manager).
    #[arg(long = "bootstrap-kubeconfig")]
    bootstrap_kubeconfig: Option<PathBuf>,
    /// Where the node's client certificate and key are written
    /// (keelson-agent-client-current.pem) [default: <root-dir>/pki].
    #[arg(long = "cert-dir")]
    cert_dir: Option<PathBuf>,
    /// Node name (default: the host name).
    #[arg(long = "hostname-override")]
    hostname_override: Option<String>,
    /// containerd's CRI socket, as a path or unix:// URL.
    #[arg(
        long = "container-runtime-endpoint",
        default_value = "/run/containerd/containerd.sock"
    )]
    container_runtime_endpoint: String,
    /// The node's InternalIP (default: first global IPv4 address).
    #[arg(long = "node-ip")]
    node_ip: Option<IpAddr>,
    /// Pod CIDR for a standalone node: written to a Node without spec.podCIDR. Without it the
    /// agent waits (Ready=False) until node IPAM in the controller manager sets spec.podCIDR.
    #[arg(long = "pod-cidr")]
    pod_cidr: Option<ipnetwork::Ipv4Network>,
    /// The cluster's pod network: only pod CIDRs inside it are routed or bridged.
    #[arg(long = "cluster-cidr", default_value = "10.244.0.0/16")]
    cluster_cidr: ipnetwork::Ipv4Network,
    /// How pods reach other nodes' pods: "host-gw" (a route per node via its InternalIP; every
    /// node on one L2 segment) or "vxlan" (an overlay device keelson.1, VNI 1, UDP port 8472).
    #[arg(long = "network-backend", default_value = "host-gw")]
    network_backend: keelson_agent::node::network::Backend,
    /// With --network-backend vxlan: nodes on a directly connected subnet get host-gw routes,
    /// only the others go through the overlay (flannel's DirectRouting).
    #[arg(long = "vxlan-direct-routing")]
    vxlan_direct_routing: bool,
    /// Where the CNI conflist is written (containerd's CRI conf_dir) [default:
    /// /etc/keelson/<node>/cni/net.d]. The IPAM state is kept in /var/lib/keelson/<node>/cni.
    #[arg(long = "cni-conf-dir")]
    cni_conf_dir: Option<PathBuf>,
    /// CNI plugin type written in the conflist ("keelson-cni", or "bridge" for the reference plugins).
    #[arg(long = "cni-plugin", default_value = "keelson-cni")]
    cni_plugin: String,
    /// IPAM plugin type ("keelson-ipam", or "host-local").
    #[arg(long = "cni-ipam", default_value = "keelson-ipam")]
    cni_ipam: String,
    #[arg(long = "cni-bridge", default_value = "keelson0")]
    cni_bridge: String,
    /// Chain the `portmap` plugin for hostPort (it must be in containerd's CNI bin dir, e.g.
    /// from containernetworking-plugins).
    #[arg(long = "cni-portmap")]
    cni_portmap: bool,
    /// The agent's state: pod volumes, credentials [default: /var/lib/keelson/<node>/agent].
    #[arg(long = "root-dir")]
    root_dir: Option<PathBuf>,
    /// Pods' container logs [default: /var/log/keelson/<node>/pods].
    #[arg(long = "pod-log-dir")]
    pod_log_dir: Option<PathBuf>,
    /// Parent cgroup of all pods, cgroupfs syntax [default: /keelson/<node>].
    #[arg(long = "cgroup-root")]
    cgroup_root: Option<String>,
    /// Cluster DNS server(s) for dnsPolicy ClusterFirst (none: the node's resolv.conf).
    #[arg(long = "cluster-dns", value_delimiter = ',')]
    cluster_dns: Vec<String>,
    #[arg(long = "cluster-domain", default_value = "cluster.local")]
    cluster_domain: String,
    #[arg(long, default_value = "0.0.0.0")]
    address: IpAddr,
    #[arg(long, default_value_t = 10250)]
    port: u16,
    #[arg(long = "tls-cert-file")]
    tls_cert_file: Option<PathBuf>,
    #[arg(long = "tls-private-key-file")]
    tls_private_key_file: Option<PathBuf>,
    /// Client certificates signed by this CA authenticate on the HTTPS port (user = CommonName,
    /// groups = Organizations); without it only bearer tokens do (checked by TokenReview).
    #[arg(long = "client-ca-file")]
    client_ca_file: Option<PathBuf>,
    /// Serve requests that carry no credentials on the HTTPS port as system:anonymous (still
    /// authorized through the API server) instead of answering 401.
    #[arg(long = "anonymous-auth", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    anonymous_auth: bool,
    /// Renew the client certificate (obtained with --bootstrap-kubeconfig) through a CSR at
    /// 70-90% of its lifetime, without a restart.
    #[arg(long = "rotate-certificates", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    rotate_certificates: bool,
    /// Without --tls-cert-file, request the HTTPS port's certificate from the
    /// kubernetes.io/kubelet-serving signer (for the node's name and address) and renew it as
    /// the client certificate; a self-signed one serves until it is issued.
    #[arg(long = "rotate-server-certificates", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    rotate_server_certificates: bool,
    /// How long the HTTPS port keeps a TokenReview's answer.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "2m",
          value_parser = keelson_apimachinery::parse_duration)]
    authentication_token_webhook_cache_ttl: std::time::Duration,
    /// How long the HTTPS port keeps a SubjectAccessReview that allowed.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "5m",
          value_parser = keelson_apimachinery::parse_duration)]
    authorization_webhook_cache_authorized_ttl: std::time::Duration,
    /// How long the HTTPS port keeps a SubjectAccessReview that did not allow.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "30s",
          value_parser = keelson_apimachinery::parse_duration)]
    authorization_webhook_cache_unauthorized_ttl: std::time::Duration,
    /// How long an exec, attach or port-forward stream may pass no byte before it is closed.
    #[arg(long = "streaming-connection-idle-timeout", default_value = "4h",
          value_parser = keelson_apimachinery::parse_duration)]
    streaming_connection_idle_timeout: std::time::Duration,
    #[arg(long = "max-pods", default_value_t = 110)]
    max_pods: u32,
    /// Rotate a container's log when it grows over this size (a quantity such as 10Mi).
    #[arg(long = "container-log-max-size", default_value = "10Mi")]
    container_log_max_size: String,
    /// Log files kept per container, the current one included.
    #[arg(long = "container-log-max-files", default_value_t = 5)]
    container_log_max_files: usize,
    /// Extra node labels, key=value, comma separated.
    #[arg(long = "node-labels", value_delimiter = ',')]
    node_labels: Vec<String>,
    /// Localhost seccomp profiles are read below it [default: <root-dir>/seccomp].
    #[arg(long = "seccomp-profile-root")]
    seccomp_profile_root: Option<PathBuf>,
    /// Namespaced sysctls (or `prefix.*` patterns) pods may set beyond the safe set, comma
    /// separated; a pod asking for another is rejected with SysctlForbidden.
    #[arg(long = "allowed-unsafe-sysctls", value_delimiter = ',')]
    allowed_unsafe_sysctls: Vec<String>,
    /// Resources set aside for Kubernetes daemons: cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000.
    #[arg(long = "kube-reserved", default_value = "")]
    kube_reserved: String,
    /// Resources set aside for the operating system, as --kube-reserved.
    #[arg(long = "system-reserved", default_value = "")]
    system_reserved: String,
    /// Thresholds that evict pods at once: signal<quantity or percent, comma separated.
    #[arg(long = "eviction-hard", default_value = keelson_agent::eviction::thresholds::DEFAULT_HARD)]
    eviction_hard: String,
    /// Thresholds that evict once met for their grace period (--eviction-soft-grace-period).
    #[arg(long = "eviction-soft", default_value = "")]
    eviction_soft: String,
    /// signal=duration for each soft threshold: memory.available=1m30s.
    #[arg(long = "eviction-soft-grace-period", default_value = "")]
    eviction_soft_grace_period: String,
    /// signal=quantity: how much past a threshold is reclaimed once evicting.
    #[arg(long = "eviction-minimum-reclaim", default_value = "")]
    eviction_minimum_reclaim: String,
    /// How long a pressure condition stays after its threshold was last met.
    #[arg(long = "eviction-pressure-transition-period", default_value = "5m",
          value_parser = keelson_apimachinery::parse_duration)]
    eviction_pressure_transition_period: std::time::Duration,
    /// How often the eviction manager observes the node.
    #[arg(long = "housekeeping-interval", default_value = "10s",
          value_parser = keelson_apimachinery::parse_duration)]
    housekeeping_interval: std::time::Duration,
    /// What allocatable is enforced on: `pods` (the pods together are evicted past allocatable
    /// memory), or `none`.
    #[arg(long = "enforce-node-allocatable", default_value = "pods")]
    enforce_node_allocatable: String,
    /// Percent of the image filesystem in use from which unused images are removed (100: never).
    #[arg(long = "image-gc-high-threshold", default_value_t = 85)]
    image_gc_high_threshold: u8,
    /// Percent of the image filesystem in use that image garbage collection brings usage back to.
    #[arg(long = "image-gc-low-threshold", default_value_t = 80)]
    image_gc_low_threshold: u8,
    /// How long an image stays, unused, before it may be removed.
    #[arg(long = "minimum-image-ttl-duration", default_value = "2m",
          value_parser = keelson_apimachinery::parse_duration)]
    minimum_image_ttl_duration: std::time::Duration,
    /// A directory of Pod manifests run as static pods (shown in the API as mirror pods).
    #[arg(long = "pod-manifest-path")]
    pod_manifest_path: Option<PathBuf>,
    /// How often the static pods' directory is read.
    #[arg(long = "file-check-frequency", default_value = "20s",
          value_parser = keelson_apimachinery::parse_duration)]
    file_check_frequency: std::time::Duration,
    /// How long a node shutdown is delayed (a logind inhibitor) while pods are stopped;
    /// 0 (the default) leaves shutdowns alone.
    #[arg(long = "shutdown-grace-period", default_value = "0s",
          value_parser = keelson_apimachinery::parse_duration)]
    shutdown_grace_period: std::time::Duration,
    /// The last part of --shutdown-grace-period, kept for critical pods (stopped last).
    #[arg(long = "shutdown-grace-period-critical-pods", default_value = "0s",
          value_parser = keelson_apimachinery::parse_duration)]
    shutdown_grace_period_critical_pods: std::time::Duration,
}

/// `keelson-agent load-balancer`: the client-side load balancer in front of several API servers
/// (keelson_daemon::lb), a process of its own so the proxy and kubectl keep their connections
/// while the agent restarts, and so it runs where no agent does (an operator's machine).
#[derive(Parser, Debug)]
#[command(
    name = "keelson-agent load-balancer",
    about = "Forwards connections on a loopback port to whichever of several API servers is ready"
)]
struct LoadBalancerFlags {
    /// The API servers, comma separated: https://10.0.0.1:6443,https://10.0.0.2:6443.
    #[arg(long = "apiserver-endpoints")]
    apiserver_endpoints: String,
    /// Where clients connect (their kubeconfig's server: https://127.0.0.1:6444).
    #[arg(long = "listen", default_value = "127.0.0.1:6444")]
    listen: std::net::SocketAddr,
    /// How often each API server's /readyz is checked.
    #[arg(long = "health-check-interval", default_value = "2s",
          value_parser = keelson_apimachinery::parse_duration)]
    health_check_interval: std::time::Duration,
    /// Where /healthz, /readyz (200 while at least one API server is ready) and /metrics
    /// (keelson_lb_*) are served. A port that cannot be bound is logged; forwarding goes on.
    #[arg(long = "metrics-bind-address", default_value = "127.0.0.1:6445")]
    metrics_bind_address: std::net::SocketAddr,
}

async fn load_balancer(flags: LoadBalancerFlags) -> anyhow::Result<()> {
    let lb = keelson_daemon::lb::LoadBalancer::bind(keelson_daemon::lb::LoadBalancerConfig {
        listen: flags.listen,
        endpoints: keelson_daemon::lb::parse_endpoints(&flags.apiserver_endpoints)?,
        health_check_interval: flags.health_check_interval,
    })
    .await?;
    tracing::info!(listen = %lb.local_addr()?, metrics = %flags.metrics_bind_address, "load balancer listening");
    let (health, registry) = lb.health_and_metrics();
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        flags.metrics_bind_address,
        registry,
        health,
    ));
    tokio::select! {
        () = lb.run() => {}
        _ = keelson_daemon::shutdown_signal() => tracing::info!("stopping the load balancer"),
    }
    Ok(())
}

/// `keelson-agent join`: the CA checked and the bootstrap kubeconfig written, before the node
/// starts (scripts/join).
#[derive(Parser, Debug)]
struct JoinFlags {
    /// The API server, https://HOST:PORT.
    server: String,
    /// The bootstrap token, ID.SECRET (scripts/token create).
    #[arg(long)]
    token: String,
    /// sha256:HEX of the cluster CA's public key: the CA read from cluster-info must have it.
    #[arg(long, required_unless_present = "ca_file", conflicts_with = "ca_file")]
    ca_cert_hash: Option<String>,
    /// A CA file already on this machine to trust instead (the API server's own node).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Where ca.crt and bootstrap.kubeconfig are written.
    #[arg(long)]
    dir: PathBuf,
}

async fn join(flags: JoinFlags) -> anyhow::Result<()> {
    use keelson_agent::bootstrap::join::{join, Join, Trust};
    let ca = match (flags.ca_cert_hash, flags.ca_file) {
        (Some(hash), _) => Trust::Pin(hash),
        (None, Some(file)) => Trust::File(file),
        (None, None) => anyhow::bail!("--ca-cert-hash or --ca-file is needed"),
    };
    let pinned = matches!(ca, Trust::Pin(_));
    let j = Join {
        server: flags.server,
        token: flags.token,
        ca,
        dir: flags.dir,
    };
    let kubeconfig = join(&j).await?;
    if pinned {
        println!("the CA of {} matches the hash given", j.server);
    }
    println!("wrote {}", kubeconfig.display());
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keelson_daemon::init_logging();
    if std::env::args().nth(1).as_deref() == Some("join") {
        let args = std::env::args().skip(2);
        let flags =
            JoinFlags::parse_from(std::iter::once("keelson-agent join".to_string()).chain(args));
        // The error alone, as a command-line tool says it (no backtrace).
        if let Err(e) = join(flags).await {
            eprintln!("keelson-agent join: {e}");
            std::process::exit(1);
        }
        return Ok(());
    }
    if std::env::args().nth(1).as_deref() == Some("load-balancer") {
        let args = std::env::args().skip(2);
        let flags = LoadBalancerFlags::parse_from(
            std::iter::once("keelson-agent load-balancer".to_string()).chain(args),
        );
        return load_balancer(flags).await;
    }
    let config = agent_config(Flags::parse())?;
    tokio::select! {
        result = keelson_agent::run(config) => result?,
        _ = keelson_daemon::shutdown_signal() => tracing::info!("stopping; pods keep running and are adopted on the next start"),
    }
    Ok(())
}

/// The agent's settings from the flags (the node name defaults to the host name).
fn agent_config(flags: Flags) -> anyhow::Result<keelson_agent::AgentConfig> {
    let node_name = keelson_daemon::node_name(flags.hostname_override)?;
    keelson_agent::paths::check_node_name(&node_name).map_err(anyhow::Error::msg)?;
    let defaults = keelson_agent::paths::NodePaths::defaults(&node_name);
    let socket = flags
        .container_runtime_endpoint
        .trim_start_matches("unix://")
        .to_string();
    let node_labels = flags
        .node_labels
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let root_dir = flags.root_dir.unwrap_or(defaults.root_dir);
    keelson_agent::pod::security::check_allowed_unsafe(&flags.allowed_unsafe_sysctls)
        .map_err(|e| anyhow::anyhow!("--allowed-unsafe-sysctls: {e}"))?;
    let seccomp_root = flags
        .seccomp_profile_root
        .unwrap_or_else(|| root_dir.join("seccomp"));
    let cert_dir = flags
        .cert_dir
        .unwrap_or_else(|| keelson_agent::paths::NodePaths::cert_dir(&root_dir));
    Ok(keelson_agent::AgentConfig {
        node_name,
        kubeconfig: flags.kubeconfig,
        bootstrap_kubeconfig: flags.bootstrap_kubeconfig,
        cert_dir,
        runtime_socket: socket.into(),
        node_ip: flags.node_ip,
        pod_cidr: flags.pod_cidr.map(|c| c.to_string()),
        cluster_cidr: flags.cluster_cidr,
        network_backend: flags.network_backend,
        vxlan_direct_routing: flags.vxlan_direct_routing,
        cni_conf_dir: flags.cni_conf_dir.unwrap_or(defaults.cni_conf_dir),
        cni_ipam_data_dir: defaults.cni_ipam_data_dir,
        cni_plugin: flags.cni_plugin,
        cni_ipam: flags.cni_ipam,
        cni_bridge: flags.cni_bridge,
        cni_portmap: flags.cni_portmap,
        root_dir,
        pod_log_dir: flags.pod_log_dir.unwrap_or(defaults.pod_log_dir),
        cgroup_root: flags.cgroup_root.unwrap_or(defaults.cgroup_root),
        cluster_dns: flags.cluster_dns,
        cluster_domain: flags.cluster_domain,
        address: flags.address,
        port: flags.port,
        tls_cert_file: flags.tls_cert_file,
        tls_key_file: flags.tls_private_key_file,
        client_ca_file: flags.client_ca_file,
        anonymous_auth: flags.anonymous_auth,
        rotate_certificates: flags.rotate_certificates,
        rotate_server_certificates: flags.rotate_server_certificates,
        auth_cache: keelson_agent::server::auth::cache::Ttls {
            token: flags.authentication_token_webhook_cache_ttl,
            authorized: flags.authorization_webhook_cache_authorized_ttl,
            unauthorized: flags.authorization_webhook_cache_unauthorized_ttl,
        },
        max_pods: flags.max_pods,
        streaming_connection_idle_timeout: flags.streaming_connection_idle_timeout,
        container_log_max_size: keelson_agent::quantity::bytes(&flags.container_log_max_size)
            .and_then(|b| u64::try_from(b).ok())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--container-log-max-size {}: not a size",
                    flags.container_log_max_size
                )
            })?,
        container_log_max_files: flags.container_log_max_files.max(1),
        node_labels,
        seccomp_profile_root: seccomp_root,
        allowed_unsafe_sysctls: flags.allowed_unsafe_sysctls,
        reserved: reserved(&flags.kube_reserved, &flags.system_reserved)?,
        eviction: keelson_agent::config::EvictionConfig {
            thresholds: keelson_agent::eviction::thresholds::parse(
                &keelson_agent::eviction::thresholds::Flags {
                    hard: flags.eviction_hard,
                    soft: flags.eviction_soft,
                    soft_grace: flags.eviction_soft_grace_period,
                    min_reclaim: flags.eviction_minimum_reclaim,
                },
            )
            .map_err(|e| anyhow::anyhow!("eviction thresholds: {e}"))?,
            transition: flags.eviction_pressure_transition_period,
            interval: flags.housekeeping_interval,
            enforce_pods: enforce_pods(&flags.enforce_node_allocatable)?,
        },
        pod_manifest_path: flags.pod_manifest_path,
        file_check_frequency: flags.file_check_frequency,
        shutdown: keelson_agent::shutdown::Settings::new(
            flags.shutdown_grace_period,
            flags.shutdown_grace_period_critical_pods,
        )
        .map_err(anyhow::Error::msg)?,
        image_gc: image_gc(
            flags.image_gc_high_threshold,
            flags.image_gc_low_threshold,
            flags.minimum_image_ttl_duration,
        )?,
    })
}

fn image_gc(
    high: u8,
    low: u8,
    min_age: std::time::Duration,
) -> anyhow::Result<keelson_agent::gc::images::Policy> {
    let policy = keelson_agent::gc::images::Policy {
        high_percent: high,
        low_percent: low,
        min_age,
    };
    policy.check().map_err(anyhow::Error::msg)?;
    Ok(policy)
}

fn reserved(
    kube: &str,
    system: &str,
) -> anyhow::Result<keelson_agent::node::allocatable::Reserved> {
    use keelson_agent::node::allocatable::Reserved;
    let kube = Reserved::parse(kube).map_err(|e| anyhow::anyhow!("--kube-reserved: {e}"))?;
    let system = Reserved::parse(system).map_err(|e| anyhow::anyhow!("--system-reserved: {e}"))?;
    Ok(kube.plus(&system))
}

/// `pods` or `none` (upstream's system-reserved and kube-reserved cgroups are not managed here).
fn enforce_pods(text: &str) -> anyhow::Result<bool> {
    let mut pods = false;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item {
            "pods" => pods = true,
            "none" => {}
            other => anyhow::bail!(
                "--enforce-node-allocatable {other}: only pods or none (no system-reserved or kube-reserved cgroup is managed)"
            ),
        }
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(extra: &[&str]) -> Result<Flags, clap::Error> {
        let base = ["keelson-agent", "--kubeconfig", "/k"];
        Flags::try_parse_from(base.iter().chain(extra))
    }

    #[test]
    fn port_auth_flags_default_as_the_kubelet_under_kubeadm() {
        let f = parse(&[]).unwrap();
        assert!(!f.anonymous_auth);
        assert_eq!(
            f.authentication_token_webhook_cache_ttl,
            Duration::from_secs(120)
        );
        assert_eq!(
            f.authorization_webhook_cache_authorized_ttl,
            Duration::from_secs(300)
        );
        assert_eq!(
            f.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(30)
        );
        assert!(parse(&["--anonymous-auth"]).unwrap().anonymous_auth);
        assert!(parse(&["--anonymous-auth=true"]).unwrap().anonymous_auth);
        assert!(!parse(&["--anonymous-auth=false"]).unwrap().anonymous_auth);
        assert!(f.rotate_certificates && !f.rotate_server_certificates);
        assert!(
            !parse(&["--rotate-certificates=false"])
                .unwrap()
                .rotate_certificates
        );
        assert!(
            parse(&["--rotate-server-certificates"])
                .unwrap()
                .rotate_server_certificates
        );
        let ttl = parse(&["--authorization-webhook-cache-unauthorized-ttl", "1s"]).unwrap();
        assert_eq!(
            ttl.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(1)
        );
        let bad = parse(&["--authentication-token-webhook-cache-ttl", "soon"]).unwrap_err();
        let bad = bad.to_string();
        assert!(
            bad.contains("--authentication-token-webhook-cache-ttl"),
            "{bad}"
        );
        assert!(bad.contains("soon"), "{bad}");
    }
}
