//! The node name a node daemon runs as: `--hostname-override` when given, else the machine's
//! host name in lower case, as the kubelet and kube-proxy derive it (Node names are lower-case
//! DNS subdomains, so an agent and a proxy on one machine always agree on it).

/// The flags every node daemon beside the agent takes, with kube-proxy's names
/// (`#[command(flatten)]` into the daemon's own flags).
#[derive(Debug, Clone, clap::Args)]
pub struct NodeFlags {
    /// Path to a kubeconfig; default: in-cluster or $KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// This node's name; default: the hostname.
    #[arg(long)]
    pub hostname_override: Option<String>,
}

/// The override (trimmed, lower-cased), or the host name from /proc/sys/kernel/hostname.
pub fn node_name(hostname_override: Option<String>) -> std::io::Result<String> {
    let name = match hostname_override {
        Some(n) => n,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")?,
    };
    Ok(name.trim().to_lowercase())
}

#[cfg(test)]
mod tests {
    #[test]
    fn override_wins_and_names_are_lower_case() {
        assert_eq!(
            super::node_name(Some(" Node-A\n".into())).unwrap(),
            "node-a"
        );
        let host = super::node_name(None).unwrap();
        assert!(!host.is_empty() && host == host.to_lowercase(), "{host}");
    }
}
