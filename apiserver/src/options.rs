//! Command-line flags, named as kube-apiserver's.

use clap::Parser;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "keelson-apiserver",
    version,
    about = "Keelson's Kubernetes-compatible API server",
    long_about = "Keelson's Kubernetes-compatible API server.\n\n\
        Serves unless a command is given. Stored objects it cannot decode at start (invalid \
        JSON, nested too deep, or not valid for their kind) are moved to a quarantine and \
        logged; `keelson-apiserver quarantine list|show KEY|delete KEY --data-dir DIR` \
        lists, prints and deletes them."
)]
pub struct Options {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Where the store, certificates and admin.kubeconfig live (0700; one server at a time).
    #[arg(long, global = true, default_value = "/var/lib/keelson/apiserver")]
    pub data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// HTTPS port.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// Address clients use to reach this server (kubeconfig and certificate SAN).
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// Extra names for the serving certificate.
    #[arg(long, value_delimiter = ',')]
    pub tls_sans: Vec<String>,
    /// Plain HTTP instead of HTTPS (tests and debugging only).
    #[arg(long)]
    pub insecure_serve_http: bool,
    /// CIDR that Service ClusterIPs are allocated from.
    #[arg(long, default_value = "10.96.0.0/16")]
    pub service_cluster_ip_range: String,
    /// Range that NodePorts are allocated from, "low-high".
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,
    /// CA bundle that client certificates must chain to (user = CN, groups = O); default the
    /// data directory's ca.crt, the cluster CA.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Client certificate presented to agents' port 10250 (pods/log) [default: the data
    /// directory's apiserver-kubelet-client.crt, CN kube-apiserver-kubelet-client, signed by
    /// the cluster CA at first start].
    #[arg(long)]
    pub kubelet_client_certificate: Option<PathBuf>,
    /// The key of --kubelet-client-certificate.
    #[arg(long)]
    pub kubelet_client_key: Option<PathBuf>,
    /// Authorizers asked in order, comma-separated: AlwaysAllow, Node, RBAC (members of
    /// system:masters are always allowed).
    #[arg(long, value_delimiter = ',', default_value = "Node,RBAC")]
    pub authorization_mode: Vec<crate::auth::authorize::Mode>,
    /// Static bearer tokens: token,user,uid,"group1,group2" per line.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// tolerationSeconds of the node.kubernetes.io/not-ready:NoExecute toleration added to
    /// every Pod that has none (admission DefaultTolerationSeconds).
    #[arg(long, default_value_t = 300)]
    pub default_not_ready_toleration_seconds: i64,
    /// tolerationSeconds of the node.kubernetes.io/unreachable:NoExecute toleration added to
    /// every Pod that has none.
    #[arg(long, default_value_t = 300)]
    pub default_unreachable_toleration_seconds: i64,
    /// How long watch history is kept, in seconds (clients resume within it without relisting).
    #[arg(long, default_value_t = 300)]
    pub watch_history_seconds: u64,
    /// Most watch events kept in memory, whatever their age.
    #[arg(long, default_value_t = 500_000)]
    pub watch_cache_size: usize,
    /// Identifier of the service-account token issuer (the tokens' `iss` claim).
    #[arg(long, default_value = "https://kubernetes.default.svc.cluster.local")]
    pub service_account_issuer: String,
    /// PEM private key that signs service-account tokens (ECDSA P-256 or RSA); default
    /// <data-dir>/sa.key, made at first start.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// More PEM keys (public or private) that service-account tokens may be signed with, e.g.
    /// another API server's; the signing key is always accepted.
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// Audiences a token must be for to authenticate to this API (default: the issuer).
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// TESTS ONLY: the shortest expirationSeconds a TokenRequest may ask for (upstream: 600),
    /// so tests can watch tokens expire and be refreshed.
    #[arg(long, default_value_t = 600, hide = true)]
    pub testing_min_token_expiration_seconds: i64,
    /// The audit log: one audit.k8s.io/v1 Event (level Metadata) per request as a JSON line,
    /// appended to this file; "-" writes to standard output. No audit log when unset.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log may reach before it is renamed aside (NAME-TIME.EXT) and a new
    /// one begins; 0 never rotates.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// Rotated audit logs kept; 0 keeps them all.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: usize,
    /// etcd servers to store objects in (comma-separated URLs, e.g. https://10.0.0.1:2379);
    /// when unset, objects are stored in SQLite in --data-dir.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    #[command(flatten)]
    pub etcd_client: EtcdClientFlags,
    /// How often etcd's history is compacted to the revision seen one interval earlier (older
    /// resourceVersions then get 410 Gone); 0 never compacts.
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub etcd_compaction_interval: Duration,
    /// How often the store is snapshotted into --snapshot-dir (as k3s's etcd snapshots);
    /// 0 never.
    #[arg(long, default_value = "12h", value_parser = duration)]
    pub snapshot_interval: Duration,
    /// Scheduled snapshots kept, newest first; 0 keeps them all.
    #[arg(long, default_value_t = 5)]
    pub snapshot_retention: usize,
    /// Where scheduled snapshots go [default: <data-dir>/snapshots].
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// How long an Event is kept after it was last seen, e.g. 1h, 30m, 90s, 1h30m (0: forever).
    #[arg(long, default_value = "1h", value_parser = duration)]
    pub event_ttl: Duration,
}

/// A duration as Go writes them (kube-apiserver's flags): "1h", "5m30s", "1h0m0s", "250ms".
fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?}: want a duration such as 1h, 30m or 90s");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    // Each part: digits, then a unit.
    let mut parts: Vec<(String, String)> = Vec::new();
    for c in s.chars() {
        match parts.last_mut() {
            Some((_, unit)) if c.is_ascii_digit() && unit.is_empty() => {
                if let Some((n, _)) = parts.last_mut() {
                    n.push(c);
                }
            }
            Some((_, unit)) if !c.is_ascii_digit() => unit.push(c),
            _ if c.is_ascii_digit() => parts.push((c.to_string(), String::new())),
            _ => return Err(bad()),
        }
    }
    let mut total = Duration::ZERO;
    for (n, unit) in &parts {
        let unit = match unit.as_str() {
            "h" => Duration::from_secs(3600),
            "m" => Duration::from_secs(60),
            "s" => Duration::from_secs(1),
            "ms" => Duration::from_millis(1),
            _ => return Err(bad()),
        };
        let n: u32 = n.parse().map_err(|_| bad())?;
        total = unit
            .checked_mul(n)
            .and_then(|d| total.checked_add(d))
            .ok_or_else(bad)?;
    }
    if parts.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

pub use crate::store::quarantine::QuarantineAction;

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Command {
    /// Stored objects moved aside at start because the server could not decode them.
    Quarantine {
        #[command(subcommand)]
        action: QuarantineAction,
    },
    /// Writes a kubeconfig for one identity: a client certificate (CN the user, O the groups,
    /// valid for a year) signed by the data directory's CA, e.g. for a component.
    Kubeconfig {
        /// The user name (certificate CN), e.g. system:kube-scheduler.
        #[arg(long)]
        user: String,
        /// A group (certificate O); at most two.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// The API server's URL, e.g. https://10.0.0.1:6443.
        #[arg(long)]
        server: String,
        /// Where to write the kubeconfig (0600).
        #[arg(long)]
        out: PathBuf,
    },
    /// Bootstrap tokens, as `kubeadm token`: create [--ttl 24h] [--description TEXT]
    /// [--print-join-command], list, delete ID.
    Token(crate::token::TokenArgs),
    /// Makes a local etcd member's PKI in --dir once (ca.crt, server.crt for 127.0.0.1 and
    /// localhost, apiserver-etcd-client.crt with their keys) and keeps it: scripts/up's etcd.
    EtcdPki {
        #[arg(long)]
        dir: PathBuf,
    },
    /// The control plane's certificates: `check [--within DAYS] [--dir DIR]...` lists those in
    /// --data-dir (and each DIR) with expiry and days left, failing when one expires within
    /// DAYS (default 30); `renew [--dir DIR]...` reissues them from their CA, same keys,
    /// subjects and names (as `kubeadm certs`). scripts/certs runs both.
    Certs {
        #[command(subcommand)]
        action: CertsAction,
    },
    /// Copies every stored object from a stopped server's SQLite store into etcd
    /// (--from sqlite:DIR --to etcd:URL); then start the server with --etcd-servers.
    Migrate(MigrateArgs),
    /// Backups of the store: `save FILE` copies the store of --data-dir while its server runs
    /// (with the data directory's certificates and keys); `restore FILE` makes --data-dir, a
    /// new directory, serve it, with resourceVersions bumped past the old server's.
    Snapshot {
        #[command(subcommand)]
        action: SnapshotAction,
    },
}

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum SnapshotAction {
    Save {
        /// Where to write the snapshot (0600: it holds Secrets and the CA key).
        file: PathBuf,
        #[command(flatten)]
        store: SnapshotStore,
    },
    Restore {
        file: PathBuf,
        /// Added to the snapshot's revision, so resourceVersions continue above every one the
        /// old server issued after the snapshot (as etcdutl's --bump-revision).
        #[arg(long, default_value_t = crate::store::snapshot::DEFAULT_BUMP)]
        bump_revision: u64,
        #[command(flatten)]
        store: SnapshotStore,
    },
}

/// Which store a snapshot is taken of or restored into: the SQLite store of --data-dir, or
/// etcd (restore: a new, empty etcd; the certificates and keys go to --data-dir).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct SnapshotStore {
    /// etcd servers (comma-separated URLs), as the server's --etcd-servers.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    #[command(flatten)]
    pub etcd: EtcdClientFlags,
}

impl SnapshotStore {
    pub fn etcd(&self) -> Option<crate::store::EtcdConfig> {
        (!self.etcd_servers.is_empty())
            .then(|| self.etcd.config(self.etcd_servers.clone(), Duration::ZERO))
    }
}

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum CertsAction {
    Check {
        /// Fail when a certificate expires within this many days.
        #[arg(long, default_value_t = 30)]
        within: i64,
        /// More directories (component kubeconfigs, the etcd PKI).
        #[arg(long = "dir")]
        dirs: Vec<PathBuf>,
    },
    Renew {
        #[arg(long = "dir")]
        dirs: Vec<PathBuf>,
    },
}

/// A flag whose value cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FlagError {
    #[error("--service-cluster-ip-range {0:?}: want an IPv4 CIDR such as 10.96.0.0/16")]
    ClusterIpRange(String),
    #[error("--service-node-port-range {0:?}: {1}")]
    NodePortRange(String, &'static str),
}

/// `keelson-apiserver migrate`: what to copy where.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct MigrateArgs {
    /// Where the objects are: sqlite:DIR, the --data-dir of a stopped keelson-apiserver.
    #[arg(long)]
    pub from: String,
    /// Where they go: etcd:URL[,URL...], the --etcd-servers the server will use.
    #[arg(long)]
    pub to: String,
    /// The server's --etcd-cafile, --etcd-certfile, --etcd-keyfile and --etcd-prefix.
    #[command(flatten)]
    pub etcd: EtcdClientFlags,
    /// Overwrite objects etcd holds under the prefix with this data directory's; objects only
    /// etcd holds are left.
    #[arg(long)]
    pub force: bool,
}

/// How to reach etcd, shared by the server and `migrate` (which must name the same store).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct EtcdClientFlags {
    /// CA bundle that etcd's serving certificates must chain to.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate presented to etcd.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// The key of --etcd-certfile.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// The prefix of every key in etcd.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
}

impl EtcdClientFlags {
    pub fn config(&self, servers: Vec<String>, compaction: Duration) -> crate::store::EtcdConfig {
        crate::store::EtcdConfig {
            servers,
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
            prefix: self.etcd_prefix.clone(),
            compaction_interval: compaction,
        }
    }
}

impl Options {
    pub fn cluster_ip_range(&self) -> Result<ipnetwork::Ipv4Network, FlagError> {
        let s = &self.service_cluster_ip_range;
        s.parse().map_err(|_| FlagError::ClusterIpRange(s.clone()))
    }

    /// The etcd backend's settings, if --etcd-servers is given.
    pub fn etcd(&self) -> Option<crate::store::EtcdConfig> {
        (!self.etcd_servers.is_empty()).then(|| {
            self.etcd_client
                .config(self.etcd_servers.clone(), self.etcd_compaction_interval)
        })
    }

    pub fn node_port_range(&self) -> Result<std::ops::RangeInclusive<u16>, FlagError> {
        port_range(&self.service_node_port_range)
    }
}

/// Parses "30000-32767".
fn port_range(s: &str) -> Result<std::ops::RangeInclusive<u16>, FlagError> {
    let bad = |why| FlagError::NodePortRange(s.to_string(), why);
    let (lo, hi) = s.split_once('-').ok_or_else(|| bad("want LOW-HIGH"))?;
    let lo: u16 = lo.trim().parse().map_err(|_| bad("bad low port"))?;
    let hi: u16 = hi.trim().parse().map_err(|_| bad("bad high port"))?;
    if lo == 0 || lo > hi {
        return Err(bad("want 0 < LOW <= HIGH"));
    }
    Ok(lo..=hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_writes_them() {
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("1h0m0s"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in ["", "h", "5", "5d", "99999999999h", "1h5"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_port_ranges() {
        assert_eq!(port_range("30000-32767"), Ok(30000..=32767));
        assert_eq!(port_range(" 1 - 2 "), Ok(1..=2));
        let err = port_range("0-5").unwrap_err().to_string();
        assert_eq!(
            err,
            "--service-node-port-range \"0-5\": want 0 < LOW <= HIGH"
        );
        assert!(port_range("5").is_err() && port_range("a-5").is_err());
        assert!(port_range("5-b").is_err() && port_range("6-5").is_err());
    }
}
