//! Wiring: connect to the runtime and the API, register the node, write the CNI config, start
//! the lease, node status, pod watch, relist and HTTPS server.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;

use crate::bootstrap::unix_now;
use crate::certificate::{self, rotate::Rotation, rotate::Target, serving::ServingCert};
use crate::config::AgentConfig;
use crate::cri::{Cri, GrpcCri};
use crate::error::AgentError;
use crate::metrics::Metrics;
use crate::node::{cni, lease, machine, network, pod_cidr, registration};
use crate::pod::context::Context;
use crate::pod::manager::Manager;
use crate::pod::translate::NodeSettings;
use crate::server;

/// Connects to the CRI socket, retrying for up to 30 s while containerd starts.
async fn connect_runtime(
    cfg: &AgentConfig,
    metrics: Arc<Metrics>,
) -> Result<(Arc<dyn Cri>, String), AgentError> {
    const TRIES: usize = 60;
    let mut tries = 0;
    let cri = loop {
        match GrpcCri::connect(&cfg.runtime_socket, metrics.clone()).await {
            Ok(cri) => break cri,
            Err(e) if tries + 1 == TRIES => return Err(e.into()),
            Err(_) => tries += 1,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let version = cri.version().await?;
    Ok((
        Arc::new(cri),
        format!("{}://{}", version.runtime_name, version.runtime_version),
    ))
}

/// Runs the agent until the process is stopped.
pub async fn run(cfg: AgentConfig) -> Result<(), AgentError> {
    let metrics = Arc::new(Metrics::new());
    let (cri, runtime_version) = connect_runtime(&cfg, metrics.clone()).await?;
    tracing::info!(runtime = %runtime_version, socket = %cfg.runtime_socket.display(), "connected to the container runtime");
    crate::bootstrap::ensure(&crate::bootstrap::Settings {
        node_name: cfg.node_name.clone(),
        bootstrap_kubeconfig: cfg.bootstrap_kubeconfig.clone(),
        kubeconfig: cfg.kubeconfig.clone(),
        cert_dir: cfg.cert_dir.clone(),
        timeout: crate::bootstrap::WAIT_FOR_CERTIFICATE,
    })
    .await?;
    let client = keelson_daemon::client(Some(&cfg.kubeconfig)).await?;
    let client = rotate_client_certificate(&cfg, client, metrics.clone());
    let node_ip = cfg
        .node_ip
        .or_else(machine::first_ipv4)
        .ok_or(AgentError::NoNodeIp)?;
    std::fs::create_dir_all(&cfg.root_dir).map_err(|source| AgentError::RootDir {
        path: cfg.root_dir.display().to_string(),
        source,
    })?;
    let node_cfg = registration::NodeConfig {
        name: cfg.node_name.clone(),
        internal_ip: node_ip.to_string(),
        pod_cidr: cfg.pod_cidr.clone(),
        labels: node_labels(&cfg),
        max_pods: cfg.max_pods,
        root: cfg.root_dir.clone(),
        port: cfg.port,
        runtime_version,
        reserved: cfg.reserved.clone(),
        hard_eviction: cfg.eviction.thresholds.clone(),
    };
    let node = register(&client, &node_cfg).await;
    tracing::info!(node = %cfg.node_name, ip = %node_ip, "node registered");
    // Lease and status run while the node waits for its pod CIDR (Ready=False saying so).
    let (not_ready, not_ready_rx) = tokio::sync::watch::channel(None);
    let (pressure, pressure_rx) = tokio::sync::watch::channel(Default::default());
    let loops = NodeLoops {
        not_ready: not_ready_rx,
        pressure: pressure_rx,
    };
    start_node_loops(&client, node_cfg, cri.clone(), loops).await;
    let flag = cfg.pod_cidr.as_deref();
    let pod_cidr = pod_cidr::wait(
        &client,
        &cfg.node_name,
        flag,
        cfg.cluster_cidr,
        node,
        &not_ready,
    );
    let pod_cidr = pod_cidr.await;
    write_cni_config(&cfg, &pod_cidr, node_ip)?;
    not_ready.send_replace(None);
    let network_cfg = network::NetworkConfig {
        backend: cfg.network_backend,
        direct_routing: cfg.vxlan_direct_routing,
        cluster_cidr: cfg.cluster_cidr,
    };
    tokio::spawn(network::run(
        client.clone(),
        cfg.node_name.clone(),
        node_ip,
        pod_cidr,
        network_cfg,
    ));

    let ctx = Arc::new(Context {
        cri,
        events: crate::pod::events::Recorder::new(client.clone(), cfg.node_name.clone()),
        service_links: crate::pod::service_env::ServiceLinks::start(client.clone()),
        client,
        settings: NodeSettings {
            node_name: cfg.node_name.clone(),
            cgroup_root: cfg.cgroup_root.clone(),
            pod_log_root: cfg.pod_log_dir.display().to_string(),
            cluster_dns: cfg.cluster_dns.clone(),
            cluster_domain: cfg.cluster_domain.clone(),
            security: crate::pod::security::NodeSecurity {
                seccomp_root: cfg.seccomp_profile_root.display().to_string(),
                apparmor_enabled: apparmor_enabled(),
                allowed_unsafe_sysctls: cfg.allowed_unsafe_sysctls.clone(),
            },
        },
        root: cfg.root_dir.clone(),
        host_ip: node_ip.to_string(),
        metrics,
        pods: Default::default(),
        tokens: Default::default(),
        evictions: Default::default(),
        shutting_down: Default::default(),
        static_pods: Default::default(),
        cgroups: qos_cgroups(&cfg),
        pressure: pressure.subscribe(),
    });
    start_pods(&cfg, ctx.clone(), pressure, not_ready).await;
    serve(&cfg, node_ip, ctx).await
}

/// With a bootstrapped client certificate, a client whose certificate is renewed as it runs.
fn rotate_client_certificate(
    cfg: &AgentConfig,
    client: kube::Client,
    metrics: Arc<Metrics>,
) -> kube::Client {
    if !cfg.rotate_certificates || cfg.bootstrap_kubeconfig.is_none() {
        return client;
    }
    let (client, swap) = certificate::client::rotating(client, &cfg.kubeconfig);
    let rotation = Rotation {
        node_name: cfg.node_name.clone(),
        cert_file: cfg.cert_dir.join(crate::bootstrap::CLIENT_CERT_FILE),
        target: Target::Client(swap),
        metrics,
    };
    tokio::spawn(rotation.run(client.clone()));
    client
}

/// The HTTPS port's certificate: the given files, the node's rotated serving certificate (none,
/// handshakes refused, until the first is issued), or a self-signed one.
fn serving_certificate(
    cfg: &AgentConfig,
    names: &[String],
    ctx: &Context,
) -> Result<Arc<ServingCert>, AgentError> {
    let files = (cfg.tls_cert_file.as_deref(), cfg.tls_key_file.as_deref());
    let rotated = cfg.rotate_server_certificates && files.0.is_none();
    let cert_file = cfg.cert_dir.join(certificate::SERVER_CERT_FILE);
    let existing = rotated
        .then(|| std::fs::read(&cert_file).ok())
        .flatten()
        .filter(|pem| crate::bootstrap::kubeconfig::cert_problem(pem, unix_now()).is_none())
        .and_then(|pem| certificate::serving::from_pem(&pem).ok());
    let serving = match existing {
        Some(key) => ServingCert::new(key),
        // Nothing is served on 10250 until the serving CSR is issued (no stand-in certificate).
        None if rotated => ServingCert::pending(),
        None => ServingCert::new(server::tls::initial_cert(files.0, files.1, names)?),
    };
    if rotated {
        let rotation = Rotation {
            node_name: cfg.node_name.clone(),
            cert_file,
            target: Target::Serving {
                names: names.to_vec(),
                server: serving.clone(),
            },
            metrics: ctx.metrics.clone(),
        };
        tokio::spawn(rotation.run(ctx.client.clone()));
    }
    Ok(serving)
}

/// The QoS cgroup tree; with `--enforce-node-allocatable=pods`, the node-level cgroup is held
/// to capacity less --kube-reserved and --system-reserved (CPU weight, memory, and PIDs when
/// some are reserved). A tree that cannot be made is reported here, and again by each pod.
fn qos_cgroups(cfg: &AgentConfig) -> Arc<crate::cgroups::QosCgroups> {
    use crate::cgroups::{limits, QosCgroups};
    let node = if cfg.eviction.enforce_pods {
        let capacity = machine::capacity(&cfg.root_dir, cfg.max_pods);
        let reserved = |r: &str| cfg.reserved.0.get(r).copied().unwrap_or(0);
        let cpu = capacity
            .get("cpu")
            .and_then(|q| crate::quantity::parse_milli(&q.0))
            .unwrap_or(0);
        let memory = crate::node::allocatable::pods_memory(&capacity, &cfg.reserved);
        let pids = cfg.reserved.0.contains_key("pid").then(|| {
            let max: i128 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            u64::try_from((max - reserved("pid")).max(0)).unwrap_or(0)
        });
        limits::node(cpu - reserved("cpu"), memory, pids)
    } else {
        limits::Limits::default()
    };
    let mount = std::path::Path::new(keelson_daemon::cgroupfs::MOUNT);
    let cgroups = QosCgroups::new(mount, &cfg.cgroup_root, node);
    match cgroups.ensure_node() {
        Ok(()) => tracing::info!(root = %cfg.cgroup_root, "QoS cgroups in place"),
        Err(e) => {
            tracing::error!(root = %cfg.cgroup_root, error = %e, "QoS cgroups not made: pods cannot start")
        }
    }
    Arc::new(cgroups)
}

/// The eviction manager's thresholds and sources; with `pods` enforced, allocatableMemory.available
/// at memory.available's hard threshold, as the kubelet adds it.
fn eviction_settings(
    cfg: &AgentConfig,
    image_gc: crate::gc::SharedImageGc,
) -> crate::eviction::Settings {
    use crate::eviction::{Signal, Threshold};
    let mut thresholds = cfg.eviction.thresholds.clone();
    let capacity = machine::capacity(&cfg.root_dir, cfg.max_pods);
    let pods_memory = crate::node::allocatable::pods_memory(&capacity, &cfg.reserved)
        .filter(|_| cfg.eviction.enforce_pods);
    let memory_hard = thresholds
        .iter()
        .find(|t| t.signal == Signal::MemoryAvailable && t.grace.is_none())
        .cloned();
    if let (Some(_), Some(t)) = (pods_memory, memory_hard) {
        thresholds.push(Threshold {
            signal: Signal::AllocatableMemoryAvailable,
            ..t
        });
    }
    crate::eviction::Settings {
        thresholds,
        transition: cfg.eviction.transition,
        interval: cfg.eviction.interval,
        sources: crate::eviction::observe::Sources {
            root_dir: cfg.root_dir.clone(),
            cgroup_root: cfg.cgroup_root.clone(),
            allocatable_memory: pods_memory,
        },
        image_gc,
        image_min_age: cfg.image_gc.min_age,
    }
}

/// Whether the kernel enforces AppArmor (pods asking for a profile are refused where not).
fn apparmor_enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y")
}

/// The well-known node labels, then the configured ones.
fn node_labels(cfg: &AgentConfig) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), cfg.node_name.clone()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), machine::arch()),
    ]);
    labels.extend(cfg.node_labels.iter().cloned());
    labels
}

/// Registers the Node. The API server may start after the agent (or be restarting): keep trying,
/// as the kubelet does.
async fn register(client: &kube::Client, node_cfg: &registration::NodeConfig) -> Node {
    loop {
        match registration::register(client, node_cfg).await {
            Ok(node) => return node,
            Err(e) => {
                tracing::warn!(error = %e, "node registration failed; retrying in 2s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

/// The node's own loops: its Lease and its status (Ready=False while `not_ready` holds a reason).
/// What the node status loop follows: the agent's own not-ready reason, and the pressure.
struct NodeLoops {
    not_ready: tokio::sync::watch::Receiver<Option<String>>,
    pressure: crate::eviction::PressureConditions,
}

async fn start_node_loops(
    client: &kube::Client,
    node_cfg: registration::NodeConfig,
    cri: Arc<dyn Cri>,
    loops: NodeLoops,
) {
    let node_uid = kube::Api::<Node>::all(client.clone())
        .get(&node_cfg.name)
        .await
        .ok()
        .and_then(|n| n.metadata.uid);
    tokio::spawn(lease::renew_loop(
        client.clone(),
        node_cfg.name.clone(),
        node_uid,
        Duration::from_secs(10),
    ));
    tokio::spawn(registration::status_loop(
        client.clone(),
        node_cfg,
        cri,
        Duration::from_secs(10),
        loops.not_ready,
        loops.pressure,
    ));
}

/// How often the cgroups of pods that are gone are looked for.
const CGROUP_SWEEP: Duration = Duration::from_secs(10);

/// What the cgroup sweep keeps: every pod the API, the manifests or the runtime has here.
async fn cgroup_snapshot(
    ctx: Arc<Context>,
) -> Option<(
    std::collections::BTreeSet<String>,
    Vec<Arc<k8s_openapi::api::core::v1::Pod>>,
)> {
    let selector = std::collections::HashMap::from([(
        crate::cri::labels::NODE.to_string(),
        ctx.settings.node_name.clone(),
    )]);
    let sandboxes = ctx.cri.list_pod_sandbox(selector).await.ok()?;
    let pods = ctx.all_pods();
    let keep = pods
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .chain(
            sandboxes
                .iter()
                .filter_map(|s| s.labels.get(crate::cri::labels::POD_UID).cloned()),
        )
        .collect();
    Some((keep, pods))
}

/// Log rotation, the pod watch, and (once the pods are listed) the runtime relist, the
/// eviction and node shutdown managers.
async fn start_pods(
    cfg: &AgentConfig,
    ctx: Arc<Context>,
    pressure: tokio::sync::watch::Sender<std::collections::BTreeSet<&'static str>>,
    not_ready: tokio::sync::watch::Sender<Option<String>>,
) {
    let limits = crate::pod::log_rotation::Limits {
        max_size: cfg.container_log_max_size,
        max_files: cfg.container_log_max_files,
    };
    tokio::spawn(crate::pod::log_rotation::run(
        ctx.cri.clone(),
        cfg.node_name.clone(),
        limits,
        Duration::from_secs(10),
    ));
    tokio::spawn(crate::pod::local_path::run(
        ctx.client.clone(),
        ctx.root.clone(),
        Duration::from_secs(5),
    ));
    let manager = Manager::new(ctx.clone());
    manager.clone().watch();
    // Runtime pods are matched against the API only after the first full pod list.
    ctx.pods.synced().await;
    // Static pods are known before the runtime is relisted, so a restart adopts them too.
    if let Some(dir) = cfg.pod_manifest_path.clone() {
        crate::pod::static_pods::source::load(&ctx, &dir);
        let every = cfg.file_check_frequency;
        let statics =
            crate::pod::static_pods::source::run(ctx.clone(), manager.clone(), dir, every);
        tokio::spawn(statics);
    }
    tracing::info!("pod list synced; relisting the runtime every second");
    tokio::spawn(manager.clone().relist());
    let sweep = crate::cgroups::run(ctx.cgroups.clone(), CGROUP_SWEEP, {
        let ctx = ctx.clone();
        move || cgroup_snapshot(ctx.clone())
    });
    tokio::spawn(sweep);
    let image_gc = crate::gc::SharedImageGc::default();
    let gc = crate::gc::run(ctx.cri.clone(), cfg.image_gc.clone(), image_gc.clone());
    tokio::spawn(gc);
    let shutdown = crate::shutdown::run(ctx.clone(), manager.clone(), cfg.shutdown, not_ready);
    tokio::spawn(shutdown);
    let eviction = eviction_settings(cfg, image_gc);
    tokio::spawn(crate::eviction::run(ctx, manager, eviction, pressure));
}

/// Serves logs, /healthz and /metrics over HTTPS until the process ends.
async fn serve(cfg: &AgentConfig, node_ip: IpAddr, ctx: Arc<Context>) -> Result<(), AgentError> {
    let mut names = vec![cfg.node_name.clone(), node_ip.to_string()];
    // A self-signed certificate also names localhost; one from the signer names only the
    // node's own addresses (the approver allows no other).
    if !cfg.rotate_server_certificates {
        names.push("localhost".to_string());
    }
    let client_ca = match &cfg.client_ca_file {
        Some(path) => Some(server::auth::x509::ClientCa::load(path)?),
        None => None,
    };
    let serving = serving_certificate(cfg, &names, &ctx)?;
    let tls = server::tls::server_config_with(serving, client_ca.as_ref())?;
    let settings = server::auth::Settings {
        node_name: cfg.node_name.clone(),
        client_ca,
        anonymous: cfg.anonymous_auth,
        ttls: cfg.auth_cache,
    };
    let reviews = server::auth::review::ApiReviews {
        client: ctx.client.clone(),
    };
    let auth = Arc::new(server::auth::PortAuth::new(settings, Arc::new(reviews)));
    let addr = SocketAddr::new(cfg.address, cfg.port);
    tracing::info!(%addr, "serving logs, healthz and metrics over HTTPS");
    let streaming = Arc::new(server::streaming::Streaming {
        runtime: keelson_proto::RuntimeServiceClient::new(
            keelson_proto::connect_unix(&cfg.runtime_socket).await?,
        ),
        ctx: ctx.clone(),
        idle_timeout: cfg.streaming_connection_idle_timeout,
    });
    let stats = Arc::new(crate::stats::Stats::new(
        ctx.cri.clone(),
        cfg.node_name.clone(),
    ));
    tokio::spawn(stats.clone().run());
    server::serve(addr, tls, server::router(ctx, auth, streaming, stats))
        .await
        .map_err(|source| AgentError::Serve {
            addr: addr.to_string(),
            source,
        })
}

fn write_cni_config(
    cfg: &AgentConfig,
    pod_cidr: &Ipv4Network,
    node_ip: IpAddr,
) -> Result<(), AgentError> {
    // Pods' interfaces fit the overlay's packets; without an uplink the network loop says why.
    let mtu = network::pod_mtu(node_ip, cfg.network_backend).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "pod MTU for the vxlan backend unknown; pods get the default");
        None
    });
    let plugins = cni::CniPlugins {
        main: cfg.cni_plugin.clone(),
        ipam: cfg.cni_ipam.clone(),
        portmap: cfg.cni_portmap,
    };
    let network = format!("keelson-{}", cfg.node_name);
    let text = cni::render(
        &network,
        &cfg.cni_bridge,
        *pod_cidr,
        cfg.cluster_cidr,
        mtu,
        &plugins,
        &cfg.cni_ipam_data_dir,
    );
    let changed = cni::write(&cfg.cni_conf_dir, &text).map_err(|source| AgentError::CniConfig {
        path: cfg.cni_conf_dir.display().to_string(),
        source,
    })?;
    tracing::info!(dir = %cfg.cni_conf_dir.display(), %pod_cidr, changed, "CNI configuration in place");
    Ok(())
}
