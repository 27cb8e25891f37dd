//! Routes to the other nodes' pod CIDRs via their InternalIP (host-gw style), from the Node
//! objects: pods on different nodes reach each other with no overlay. Only routes the agent
//! installed (tagged with its own route protocol number) are ever changed or removed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;

use futures::StreamExt;
use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;
use kube::Api;

/// Route protocol number marking Keelson's routes (`ip route show proto 252`).
pub const PROTO: &str = "252";

/// Routes wanted, and the nodes whose values were refused (node name -> why).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Desired {
    pub routes: BTreeMap<Ipv4Network, Ipv4Addr>,
    pub refused: BTreeMap<String, String>,
}

/// Why a pod CIDR is not one the agent manages: it must lie inside the cluster CIDR (so never
/// the default route, nor a route that would capture the node network or the host's own).
pub fn check_pod_cidr(cidr: Ipv4Network, cluster: Ipv4Network) -> Result<(), String> {
    if cidr.prefix() == 0 {
        return Err(format!("pod CIDR {cidr} would replace the default route"));
    }
    if cidr.prefix() < cluster.prefix() || !cluster.contains(cidr.network()) {
        return Err(format!(
            "pod CIDR {cidr} is not inside the cluster CIDR {cluster}"
        ));
    }
    Ok(())
}

/// A gateway must be a unicast address of another host.
fn check_gateway(ip: Ipv4Addr) -> Result<(), String> {
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
        return Err(format!("InternalIP {ip} cannot be a gateway"));
    }
    Ok(())
}

/// Pod CIDR -> gateway (the node's InternalIP) for every other node. Pure.
pub fn desired(nodes: &[Node], me: &str, cluster: Ipv4Network) -> Desired {
    let mut out = Desired::default();
    for n in nodes {
        if n.metadata.name.as_deref() == Some(me) {
            continue;
        }
        let cidr = n
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.as_deref())
            .and_then(|c| c.parse::<Ipv4Network>().ok());
        let ip = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .and_then(|a| a.address.parse::<Ipv4Addr>().ok());
        let (Some(cidr), Some(ip)) = (cidr, ip) else {
            continue;
        };
        // The network address: "10.244.1.7/24" is taken as 10.244.1.0/24, as `ip route` would.
        let cidr = Ipv4Network::new(cidr.network(), cidr.prefix()).unwrap_or(cidr);
        let verdict = check_pod_cidr(cidr, cluster).and_then(|()| check_gateway(ip));
        let name = n.metadata.name.clone().unwrap_or_default();
        match verdict {
            Ok(()) => {
                out.routes.insert(cidr, ip);
            }
            Err(why) => {
                out.refused.insert(name, why);
            }
        }
    }
    out
}

#[derive(Debug, thiserror::Error)]
#[error("{command}: {message}")]
pub struct RouteError {
    pub command: String,
    pub message: String,
}

/// The node's routing table, as far as the agent touches it.
pub trait RouteTable {
    /// The routes the agent installed earlier: destination -> gateway.
    fn list(&self) -> Result<BTreeMap<Ipv4Network, Ipv4Addr>, RouteError>;
    fn replace(&self, dst: Ipv4Network, via: Ipv4Addr) -> Result<(), RouteError>;
    fn delete(&self, dst: Ipv4Network) -> Result<(), RouteError>;
}

/// Brings the table to `want`; returns the number of changes. Failures of single routes are
/// reported and the rest still applied.
pub fn sync(
    table: &dyn RouteTable,
    want: &BTreeMap<Ipv4Network, Ipv4Addr>,
) -> Result<usize, RouteError> {
    let have = table.list()?;
    let mut changes = 0;
    for (dst, via) in want {
        if have.get(dst) != Some(via) {
            match table.replace(*dst, *via) {
                Ok(()) => changes += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "route to pod CIDR {dst} via {via} not installed")
                }
            }
        }
    }
    for dst in have.keys().filter(|d| !want.contains_key(d)) {
        match table.delete(*dst) {
            Ok(()) => changes += 1,
            Err(e) => tracing::warn!(error = %e, "stale route to {dst} not removed"),
        }
    }
    Ok(changes)
}

/// The table through iproute2 in the agent's network namespace.
pub struct IpCommand;

fn ip(args: &[&str]) -> Result<String, RouteError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| RouteError {
            command: command.clone(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(RouteError {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl RouteTable for IpCommand {
    fn list(&self) -> Result<BTreeMap<Ipv4Network, Ipv4Addr>, RouteError> {
        let text = ip(&["-4", "-j", "route", "show", "proto", PROTO])?;
        let routes: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        Ok(routes
            .iter()
            .filter_map(|r| {
                let dst = r["dst"].as_str()?.parse::<Ipv4Network>().ok()?;
                let via = r["gateway"].as_str()?.parse::<Ipv4Addr>().ok()?;
                Some((dst, via))
            })
            .collect())
    }

    fn replace(&self, dst: Ipv4Network, via: Ipv4Addr) -> Result<(), RouteError> {
        ip(&[
            "-4",
            "route",
            "replace",
            &dst.to_string(),
            "via",
            &via.to_string(),
            "proto",
            PROTO,
        ])
        .map(|_| ())
    }

    fn delete(&self, dst: Ipv4Network) -> Result<(), RouteError> {
        ip(&["-4", "route", "del", &dst.to_string(), "proto", PROTO]).map(|_| ())
    }
}

/// Watches Nodes and keeps the routes in step.
pub async fn run(client: kube::Client, me: String, cluster: Ipv4Network) {
    let api: Api<Node> = Api::all(client);
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Node>> = None;
    let mut last: Option<BTreeMap<Ipv4Network, Ipv4Addr>> = None;
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
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        }
        let list: Vec<Node> = nodes.values().cloned().collect();
        let Desired {
            routes: want,
            refused: now_refused,
        } = desired(&list, &me, cluster);
        // Logged when the set changes, not at every Node heartbeat.
        if now_refused != refused {
            for (node, why) in &now_refused {
                tracing::warn!(%node, "no route to the node's pods: {why}");
            }
            refused = now_refused;
        }
        if last.as_ref() == Some(&want) {
            continue;
        }
        let applied = want.clone();
        match tokio::task::spawn_blocking(move || sync(&IpCommand, &applied)).await {
            Ok(Ok(changes)) => {
                if changes > 0 {
                    tracing::info!(
                        routes = want.len(),
                        changes,
                        "routes to other nodes' pod CIDRs updated"
                    );
                }
                last = Some(want);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "listing routes failed"),
            Err(e) => tracing::warn!(error = %e, "route sync task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};
    use std::cell::RefCell;

    fn node(name: &str, cidr: Option<&str>, ip: &str) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: cidr.map(str::to_string),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip.into(),
                }]),
                ..Default::default()
            }),
        }
    }

    fn cluster() -> Ipv4Network {
        "10.244.0.0/16".parse().unwrap()
    }

    #[test]
    fn only_pod_cidrs_inside_the_cluster_cidr_are_routed() {
        let nodes = vec![
            node("me", Some("10.244.1.0/24"), "172.31.0.2"),
            node("good", Some("10.244.2.0/24"), "172.31.0.3"),
            node("default", Some("0.0.0.0/0"), "172.31.0.4"),
            node("wide", Some("10.0.0.0/8"), "172.31.0.5"),
            node("outside", Some("192.168.0.0/24"), "172.31.0.6"),
            node("host-net", Some("172.31.0.0/24"), "172.31.0.7"),
            node("loopback-gw", Some("10.244.3.0/24"), "127.0.0.1"),
            node("sloppy", Some("10.244.4.9/24"), "172.31.0.8"),
        ];
        let got = desired(&nodes, "me", cluster());
        let routes: Vec<String> = got
            .routes
            .iter()
            .map(|(d, v)| format!("{d} via {v}"))
            .collect();
        assert_eq!(
            routes,
            [
                "10.244.2.0/24 via 172.31.0.3",
                "10.244.4.0/24 via 172.31.0.8"
            ]
        );
        let refused: Vec<&str> = got.refused.keys().map(String::as_str).collect();
        assert_eq!(
            refused,
            ["default", "host-net", "loopback-gw", "outside", "wide"]
        );
        assert!(got.refused["default"].contains("default route"));
        // The whole IPv4 space as the cluster CIDR still never yields a default route.
        let all: Ipv4Network = "0.0.0.0/0".parse().unwrap();
        assert!(check_pod_cidr("0.0.0.0/0".parse().unwrap(), all).is_err());
    }

    #[derive(Default)]
    struct FakeTable {
        routes: RefCell<BTreeMap<Ipv4Network, Ipv4Addr>>,
        calls: RefCell<Vec<String>>,
    }

    impl RouteTable for FakeTable {
        fn list(&self) -> Result<BTreeMap<Ipv4Network, Ipv4Addr>, RouteError> {
            Ok(self.routes.borrow().clone())
        }
        fn replace(&self, dst: Ipv4Network, via: Ipv4Addr) -> Result<(), RouteError> {
            self.calls
                .borrow_mut()
                .push(format!("replace {dst} via {via}"));
            self.routes.borrow_mut().insert(dst, via);
            Ok(())
        }
        fn delete(&self, dst: Ipv4Network) -> Result<(), RouteError> {
            self.calls.borrow_mut().push(format!("del {dst}"));
            self.routes.borrow_mut().remove(&dst);
            Ok(())
        }
    }

    #[test]
    fn routes_to_other_nodes_only_and_stale_ones_removed() {
        let nodes = vec![
            node("a", Some("10.244.1.0/24"), "172.31.0.2"),
            node("b", Some("10.244.2.0/24"), "172.31.0.3"),
            node("c", None, "172.31.0.4"),
        ];
        let want = desired(&nodes, "a", cluster()).routes;
        assert_eq!(want.len(), 1);
        let table = FakeTable::default();
        table.routes.borrow_mut().insert(
            "10.244.9.0/24".parse().unwrap(),
            "172.31.0.9".parse().unwrap(),
        );
        assert_eq!(sync(&table, &want).unwrap(), 2);
        assert_eq!(
            *table.calls.borrow(),
            vec!["replace 10.244.2.0/24 via 172.31.0.3", "del 10.244.9.0/24"]
        );
        // In step already: nothing to do.
        assert_eq!(sync(&table, &want).unwrap(), 0);
    }
}
