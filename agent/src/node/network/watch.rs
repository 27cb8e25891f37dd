//! The agent's loop: set up the backend, publish the VTEP on the Node, then follow the Nodes and
//! keep the kernel in step (on a change of what peers publish, and every 30 s so that an entry
//! someone removed comes back).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;
use keelson_apimachinery::well_known::{BACKEND_TYPE_ANNOTATION, VXLAN_VTEP_MAC_ANNOTATION};
use keelson_daemon::{inform, Changes};
use keelson_netlink::link::format_mac;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::Api;

use super::{prepare, sync_nodes, vxlan, Backend, NetworkConfig};

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

/// Sets up the backend, then watches Nodes and keeps the routes (and vxlan entries) in step.
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
    // Every change wakes one sync of the Nodes as they are then (bursts are one sync).
    let changes = Changes::default();
    let nodes = inform(
        api.clone(),
        watcher::Config::default(),
        |n: &Node| n.metadata.name.clone(),
        Some,
        changes.on_change(),
    );
    let mut syncer = Syncer {
        me: me.clone(),
        cfg,
        vtep: vtep.map(|v| v.index),
        last: None,
        refused: BTreeMap::new(),
    };
    loop {
        changes.changed().await;
        if !nodes.is_synced() {
            continue;
        }
        let current = nodes.read().clone();
        // A Node recreated (or edited) without our VTEP: publish it again, or peers lose us.
        if current.get(&me).is_some_and(|own| !announces(own, vtep)) {
            let patch = annotations(vtep);
            if let Err(e) = api
                .patch(&me, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(error = %e, "re-annotating Node {me} with its VTEP failed");
            }
        }
        syncer.sync(&current).await;
    }
}

/// Runs syncs off the async workers and logs what changed.
struct Syncer {
    me: String,
    cfg: NetworkConfig,
    vtep: Option<u32>,
    /// What the last successful sync was made from, and when.
    last: Option<(Vec<String>, Instant)>,
    refused: BTreeMap<String, String>,
}

impl Syncer {
    async fn sync(&mut self, nodes: &BTreeMap<String, Node>) {
        // Node heartbeats change nothing that matters here: sync when what peers publish
        // changed, or when the last sync is 30 s old.
        let key = peer_key(nodes);
        let fresh =
            |(k, at): &(Vec<String>, Instant)| *k == key && at.elapsed() < Duration::from_secs(30);
        if self.last.as_ref().is_some_and(fresh) {
            return;
        }
        let list: Vec<Node> = nodes.values().cloned().collect();
        let (me, cfg, vtep) = (self.me.clone(), self.cfg, self.vtep);
        match tokio::task::spawn_blocking(move || sync_nodes(&list, &me, &cfg, vtep)).await {
            Ok(Ok((want, changes))) => {
                if changes > 0 {
                    let routes = want.routes.len();
                    tracing::info!(routes, changes, "routes to other nodes' pod CIDRs updated");
                }
                // Logged when the set changes, not at every sync.
                if want.refused != self.refused {
                    for (node, why) in &want.refused {
                        tracing::warn!(%node, "no route to the node's pods: {why}");
                    }
                    self.refused = want.refused;
                }
                self.last = Some((key, Instant::now()));
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "node network sync failed"),
            Err(e) => tracing::warn!(error = %e, "node network sync task failed"),
        }
    }
}

/// Whether the Node carries exactly the annotations `annotations(vtep)` writes.
fn announces(node: &Node, vtep: Option<vxlan::Vtep>) -> bool {
    let ann = node.metadata.annotations.as_ref();
    let get = |k: &str| ann.and_then(|a| a.get(k)).cloned();
    let (mac, backend) = match vtep {
        Some(v) => (Some(format_mac(&v.mac)), Some("vxlan".to_string())),
        None => (None, None),
    };
    get(VXLAN_VTEP_MAC_ANNOTATION) == mac && get(BACKEND_TYPE_ANNOTATION) == backend
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
    fn a_node_that_lost_its_vtep_annotations_is_told_apart() {
        let vtep = vxlan::Vtep {
            index: 7,
            mac: [0x0a, 0, 0, 0, 0, 0x2f],
        };
        let mut node = Node::default();
        assert!(!announces(&node, Some(vtep)));
        assert!(announces(&node, None));
        node.metadata.annotations = Some(
            [
                (BACKEND_TYPE_ANNOTATION.to_string(), "vxlan".to_string()),
                (
                    VXLAN_VTEP_MAC_ANNOTATION.to_string(),
                    "0a:00:00:00:00:2f".to_string(),
                ),
            ]
            .into(),
        );
        assert!(announces(&node, Some(vtep)));
        assert!(
            !announces(&node, None),
            "a host-gw node still claiming a VTEP"
        );
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
