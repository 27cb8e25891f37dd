//! The agent's settings (filled from flags by the binary).

use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub node_name: String,
    pub kubeconfig: PathBuf,
    /// TLS bootstrap: when set, `kubeconfig` is written from a certificate obtained with it.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Where the node's client certificate is kept.
    pub cert_dir: PathBuf,
    /// containerd's CRI socket.
    pub runtime_socket: PathBuf,
    /// InternalIP; default: the first global IPv4 address of the agent's network namespace.
    pub node_ip: Option<IpAddr>,
    /// Used when the Node has no spec.podCIDR yet.
    pub pod_cidr: Option<String>,
    /// Every node's pod CIDR lies inside it; the agent routes and bridges nothing else.
    pub cluster_cidr: ipnetwork::Ipv4Network,
    /// How pods reach other nodes' pods: host-gw routes or a vxlan overlay.
    pub network_backend: crate::node::network::Backend,
    /// vxlan: peers on a directly connected subnet get host-gw routes instead.
    pub vxlan_direct_routing: bool,
    pub cni_conf_dir: PathBuf,
    /// The IPAM plugin's state directory, written into the conflist (the node's own).
    pub cni_ipam_data_dir: PathBuf,
    pub cni_plugin: String,
    pub cni_ipam: String,
    pub cni_bridge: String,
    /// Chain the portmap plugin (hostPort) in the conflist.
    pub cni_portmap: bool,
    pub root_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub cgroup_root: String,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub address: IpAddr,
    pub port: u16,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// Client certificates signed by this CA authenticate on port 10250.
    pub client_ca_file: Option<PathBuf>,
    /// Requests without credentials on port 10250 are system:anonymous instead of 401.
    pub anonymous_auth: bool,
    /// Renew the bootstrapped client certificate while running.
    pub rotate_certificates: bool,
    /// Request and renew the HTTPS port's certificate from the kubelet-serving signer.
    pub rotate_server_certificates: bool,
    /// How long port 10250 keeps TokenReview and SubjectAccessReview answers.
    pub auth_cache: crate::server::auth::cache::Ttls,
    pub max_pods: u32,
    /// Exec, attach and port-forward streams with no traffic for this long are closed.
    pub streaming_connection_idle_timeout: std::time::Duration,
    /// Container logs are rotated over this size, keeping this many files per container.
    pub container_log_max_size: u64,
    pub container_log_max_files: usize,
    pub node_labels: Vec<(String, String)>,
    /// Localhost seccomp profiles are files below it.
    pub seccomp_profile_root: PathBuf,
    /// Sysctls or `prefix.*` patterns pods may set beyond the safe set.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `--kube-reserved` and `--system-reserved` together.
    pub reserved: crate::node::allocatable::Reserved,
    pub eviction: EvictionConfig,
    pub image_gc: crate::gc::images::Policy,
    /// Static pods' manifests (the kubelet's staticPodPath), read every `file_check_frequency`.
    pub pod_manifest_path: Option<PathBuf>,
    pub file_check_frequency: std::time::Duration,
    /// Graceful node shutdown (--shutdown-grace-period, --shutdown-grace-period-critical-pods).
    pub shutdown: crate::shutdown::Settings,
}

/// The eviction manager's settings (the kubelet's eviction flags).
#[derive(Clone, Debug)]
pub struct EvictionConfig {
    /// Hard and soft thresholds.
    pub thresholds: Vec<crate::eviction::Threshold>,
    /// How long a pressure condition stays after its last threshold was met.
    pub transition: std::time::Duration,
    /// How often the node's signals are observed.
    pub interval: std::time::Duration,
    /// `--enforce-node-allocatable` has `pods`: the pods together are held to allocatable
    /// memory too (allocatableMemory.available, at memory.available's hard threshold).
    pub enforce_pods: bool,
}
