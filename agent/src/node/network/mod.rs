//! The node network: how pods on this node reach pods on the others, from the Node objects.
//! Two backends (flannel's as the model): host-gw, a route per peer's pod CIDR via its
//! InternalIP; vxlan, an overlay device with a route, neighbour and FDB entry per peer. All
//! kernel state goes through keelson-netlink, the CNI plugin's client too; only what the agent
//! marked as its own (route protocol 252, the `keelson.1` device) is ever changed, and what an
//! earlier run left is reconciled at the first sync.

pub mod peers;
pub mod table;
pub mod vxlan;
mod watch;

use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;

pub use peers::check_pod_cidr;
pub use watch::run;

/// A hardware (MAC) address.
pub type Mac = [u8; 6];

/// `--network-backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    HostGw,
    Vxlan,
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "host-gw" => Ok(Backend::HostGw),
            "vxlan" => Ok(Backend::Vxlan),
            other => Err(format!(
                "unknown network backend {other:?}: use host-gw or vxlan"
            )),
        }
    }
}

/// The node network's settings (from the agent's flags).
#[derive(Clone, Copy, Debug)]
pub struct NetworkConfig {
    pub backend: Backend,
    /// `--vxlan-direct-routing`: peers on a directly connected subnet get host-gw routes.
    pub direct_routing: bool,
    pub cluster_cidr: Ipv4Network,
}

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{what}: {source}")]
    Netlink {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "no link holds the node IP {0}; the vxlan device needs it as its uplink (check --node-ip)"
    )]
    NoUplink(Ipv4Addr),
    #[error("the vxlan backend needs an IPv4 node IP, not {0}")]
    NotIpv4(IpAddr),
    #[error("{0} vanished right after it was created")]
    Vanished(String),
    #[error("the vxlan device's MAC: {0}")]
    Mac(String),
}

/// Sets up the backend's device (vxlan) or removes one a vxlan run left (host-gw); returns the
/// VTEP when there is one.
pub fn prepare(
    node_ip: IpAddr,
    pod_cidr: Ipv4Network,
    backend: Backend,
) -> Result<Option<vxlan::Vtep>, NetworkError> {
    let mut kernel = table::Kernel::open(None)?;
    match backend {
        Backend::Vxlan => {
            let IpAddr::V4(ip) = node_ip else {
                return Err(NetworkError::NotIpv4(node_ip));
            };
            vxlan::ensure(kernel.netlink(), ip, pod_cidr).map(Some)
        }
        Backend::HostGw => {
            if vxlan::remove(kernel.netlink())? {
                tracing::info!(
                    device = vxlan::DEVICE,
                    "removed the vxlan device of an earlier run"
                );
            }
            Ok(None)
        }
    }
}

/// The MTU pods' interfaces need: the vxlan device's (uplink minus the encapsulation), so that
/// no pod sends a packet the overlay cannot carry; None for host-gw (the default fits).
pub fn pod_mtu(node_ip: IpAddr, backend: Backend) -> Result<Option<u32>, NetworkError> {
    if backend == Backend::HostGw {
        return Ok(None);
    }
    let IpAddr::V4(ip) = node_ip else {
        return Err(NetworkError::NotIpv4(node_ip));
    };
    let mut kernel = table::Kernel::open(None)?;
    Ok(Some(vxlan::spec(kernel.netlink(), ip)?.mtu))
}

/// One sync in the current network namespace: the plan from `nodes`, applied. Returns what was
/// wanted (for logging the refused nodes) and the number of changes.
pub fn sync_nodes(
    nodes: &[Node],
    me: &str,
    cfg: &NetworkConfig,
    vtep: Option<u32>,
) -> Result<(peers::Desired, usize), NetworkError> {
    let mut kernel = table::Kernel::open(vtep)?;
    let connected = kernel.connected(cfg.cluster_cidr)?;
    let plan = peers::Plan {
        me,
        backend: cfg.backend,
        direct_routing: cfg.direct_routing,
        cluster: cfg.cluster_cidr,
        connected: &connected,
    };
    let want = peers::desired(nodes, &plan);
    let changes = table::sync(&mut kernel, &want)?;
    Ok((want, changes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names() {
        assert_eq!("host-gw".parse(), Ok(Backend::HostGw));
        assert_eq!("vxlan".parse(), Ok(Backend::Vxlan));
        let err = "udp".parse::<Backend>().unwrap_err();
        assert!(err.contains("host-gw or vxlan"), "{err}");
    }
}
