//! The node network: how pods on this node reach pods on the others, from the Node objects.
//! Two backends (flannel's as the model): host-gw, a route per peer's pod CIDR via its
//! InternalIP; vxlan, an overlay device with a route, neighbour and FDB entry per peer. All
//! kernel state goes through the CNI plugin's netlink client; only what the agent marked as its
//! own (route protocol 252, the `keelson.1` device) is ever changed, and what an earlier run left
//! is reconciled at the first sync.

pub mod peers;
pub mod table;
pub mod vxlan;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;
use keelson_apimachinery::well_known::{BACKEND_TYPE_ANNOTATION, VXLAN_VTEP_MAC_ANNOTATION};
use keelson_cni::netlink::link::format_mac;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::Api;

pub use peers::check_pod_cidr;

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

/// The annotations peers read: the VTEP MAC and backend type, or their removal (host-gw).
fn annotations(vtep: Option<vxlan::Vtep>) -> serde_json::Value {
    let (mac, backend) = match vtep {
        Some(v) => (Some(format_mac(&v.mac)), Some("vxlan")),
        None => (None, None),
    };
    serde_json::json!({ "metadata": { "annotations": {
        VXLAN_VTEP_MAC_ANNOTATION: mac,
        BACKEND_TYPE_ANNOTATION: backend,
    }}})
}

/// Prepares the backend and publishes the VTEP on the Node, retrying until both worked.
async fn start(
    api: &Api<Node>,
    me: &str,
    node_ip: IpAddr,
    pod_cidr: Ipv4Network,
    backend: Backend,
) -> Option<vxlan::Vtep> {
    loop {
        let prepared =
            tokio::task::spawn_blocking(move || prepare(node_ip, pod_cidr, backend)).await;
        let result = match prepared {
            Ok(Ok(vtep)) => api
                .patch(
                    me,
                    &PatchParams::default(),
                    &Patch::Merge(&annotations(vtep)),
                )
                .await
                .map(|_| vtep)
                .map_err(|e| format!("annotating Node {me}: {e}")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(vtep) => return vtep,
            Err(e) => {
                tracing::warn!(error = %e, ?backend, "node network setup failed; retrying in 5s")
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// Sets up the backend, then watches Nodes and keeps the routes (and vxlan entries) in step;
/// also every 30 s, so that an entry someone removed comes back.
pub async fn run(
    client: kube::Client,
    me: String,
    node_ip: IpAddr,
    pod_cidr: Ipv4Network,
    cfg: NetworkConfig,
) {
    let api: Api<Node> = Api::all(client);
    let vtep = start(&api, &me, node_ip, pod_cidr, cfg.backend).await;
    if let Some(v) = vtep {
        tracing::info!(device = vxlan::DEVICE, mac = %format_mac(&v.mac), "vxlan VTEP ready");
    }
    let vtep = vtep.map(|v| v.index);
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Node>> = None;
    let mut last: Option<(Vec<String>, Instant)> = None;
    let mut refused = BTreeMap::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(n)) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(n.metadata.name.clone().unwrap_or_default(), n);
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => nodes = listing.take().unwrap_or_default(),
            Ok(watcher::Event::Apply(n)) => {
                nodes.insert(n.metadata.name.clone().unwrap_or_default(), n);
            }
            Ok(watcher::Event::Delete(n)) => {
                nodes.remove(n.metadata.name.as_deref().unwrap_or(""));
            }
            Err(e) => {
                tracing::warn!(error = %e, "node watch error; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        // Node heartbeats change nothing that matters here: sync when what peers publish
        // changed, or when the last sync is 30 s old.
        let key = peer_key(&nodes);
        if last
            .as_ref()
            .is_some_and(|(k, at)| *k == key && at.elapsed() < Duration::from_secs(30))
        {
            continue;
        }
        let list: Vec<Node> = nodes.values().cloned().collect();
        let (me2, cfg2) = (me.clone(), cfg);
        match tokio::task::spawn_blocking(move || sync_nodes(&list, &me2, &cfg2, vtep)).await {
            Ok(Ok((want, changes))) => {
                if changes > 0 {
                    tracing::info!(
                        routes = want.routes.len(),
                        changes,
                        "routes to other nodes' pod CIDRs updated"
                    );
                }
                // Logged when the set changes, not at every sync.
                if want.refused != refused {
                    for (node, why) in &want.refused {
                        tracing::warn!(%node, "no route to the node's pods: {why}");
                    }
                    refused = want.refused;
                }
                last = Some((key, Instant::now()));
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "node network sync failed"),
            Err(e) => tracing::warn!(error = %e, "node network sync task failed"),
        }
    }
}

/// What a sync depends on, per node: name, pod CIDR, addresses, the two annotations.
fn peer_key(nodes: &BTreeMap<String, Node>) -> Vec<String> {
    nodes
        .iter()
        .map(|(name, n)| {
            let cidr = n.spec.as_ref().and_then(|s| s.pod_cidr.as_deref());
            let addrs = n.status.as_ref().and_then(|s| s.addresses.as_ref());
            let ann = n.metadata.annotations.as_ref();
            let get = |k: &str| ann.and_then(|a| a.get(k));
            let ips: Vec<&str> = addrs
                .iter()
                .flat_map(|a| a.iter())
                .map(|a| a.address.as_str())
                .collect();
            format!(
                "{name} {cidr:?} {ips:?} {:?} {:?}",
                get(VXLAN_VTEP_MAC_ANNOTATION),
                get(BACKEND_TYPE_ANNOTATION)
            )
        })
        .collect()
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

    #[test]
    fn annotations_set_for_a_vtep_and_removed_without() {
        let vtep = vxlan::Vtep {
            index: 7,
            mac: [0x0a, 0, 0, 0, 0, 0x2f],
        };
        assert_eq!(
            annotations(Some(vtep)).to_string(),
            r#"{"metadata":{"annotations":{"keelson.dev/backend-type":"vxlan","keelson.dev/vxlan-vtep-mac":"0a:00:00:00:00:2f"}}}"#
        );
        assert_eq!(
            annotations(None).to_string(),
            r#"{"metadata":{"annotations":{"keelson.dev/backend-type":null,"keelson.dev/vxlan-vtep-mac":null}}}"#
        );
    }
}
