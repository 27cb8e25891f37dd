//! Where a node keeps its files by default. Every default holds the node name, so that several
//! agents on one machine (test hosts, a laptop cluster) never share a CNI configuration, IPAM
//! state, pod logs, cgroups or credentials.

use std::path::PathBuf;

/// The per-node defaults, each overridable by its flag (the IPAM state only follows the node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePaths {
    /// `--root-dir`: pod volumes, the agent's own state.
    pub root_dir: PathBuf,
    /// `--cni-conf-dir`: where the conflist is written (containerd's CRI `conf_dir`).
    pub cni_conf_dir: PathBuf,
    /// `--pod-log-dir`: `<ns>_<pod>_<uid>/<container>/N.log` below it.
    pub pod_log_dir: PathBuf,
    /// `--cgroup-root`: the parent cgroup of every pod (cgroupfs syntax).
    pub cgroup_root: String,
    /// The IPAM plugin's `dataDir` in the conflist (its allocations live below it).
    pub cni_ipam_data_dir: PathBuf,
}

impl NodePaths {
    /// The defaults for node `node` (a DNS-1123 subdomain, so it names a single path component).
    pub fn defaults(node: &str) -> NodePaths {
        NodePaths {
            root_dir: PathBuf::from(format!("/var/lib/keelson/{node}/agent")),
            cni_conf_dir: PathBuf::from(format!("/etc/keelson/{node}/cni/net.d")),
            pod_log_dir: PathBuf::from(format!("/var/log/keelson/{node}/pods")),
            cgroup_root: format!("/keelson/{node}"),
            cni_ipam_data_dir: PathBuf::from(format!("/var/lib/keelson/{node}/cni")),
        }
    }

    /// `--cert-dir`'s default: `pki` under the root directory, as the kubelet's.
    pub fn cert_dir(root_dir: &std::path::Path) -> PathBuf {
        root_dir.join("pki")
    }
}

/// Why a node name cannot name the node's folders: empty, or not a DNS-1123 subdomain (which
/// also keeps out `/`, `..` and spaces).
pub fn check_node_name(node: &str) -> Result<(), String> {
    let problems = keelson_apimachinery::validation::dns1123_subdomain(node);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("node name {node:?}: {}", problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_names_the_node() {
        let a = NodePaths::defaults("node-a");
        assert_eq!(a.root_dir, PathBuf::from("/var/lib/keelson/node-a/agent"));
        assert_eq!(
            a.cni_conf_dir,
            PathBuf::from("/etc/keelson/node-a/cni/net.d")
        );
        assert_eq!(a.pod_log_dir, PathBuf::from("/var/log/keelson/node-a/pods"));
        assert_eq!(a.cgroup_root, "/keelson/node-a");
        assert_eq!(
            a.cni_ipam_data_dir,
            PathBuf::from("/var/lib/keelson/node-a/cni")
        );
        assert_eq!(
            NodePaths::cert_dir(&a.root_dir),
            PathBuf::from("/var/lib/keelson/node-a/agent/pki")
        );
        // Two nodes on one machine share none of them.
        let b = NodePaths::defaults("node-b");
        let paths = |p: &NodePaths| {
            [
                p.root_dir.clone(),
                p.cni_conf_dir.clone(),
                p.pod_log_dir.clone(),
                PathBuf::from(&p.cgroup_root),
                p.cni_ipam_data_dir.clone(),
            ]
        };
        for pa in paths(&a) {
            for pb in paths(&b) {
                assert!(
                    !pa.starts_with(&pb) && !pb.starts_with(&pa),
                    "{pa:?} and {pb:?} overlap"
                );
            }
        }
    }

    #[test]
    fn node_names_that_would_escape_their_folder_are_refused() {
        assert!(check_node_name("worker-1.example").is_ok());
        for bad in ["", "..", "a/b", "../etc", "Node A"] {
            assert!(check_node_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
