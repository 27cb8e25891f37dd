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

/// Pod CIDR -> gateway (the node's InternalIP) for every other node. Pure.
pub fn desired(nodes: &[Node], me: &str) -> BTreeMap<Ipv4Network, Ipv4Addr> {
    let mut routes = BTreeMap::new();
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
        if let (Some(cidr), Some(ip)) = (cidr, ip) {
            routes.insert(cidr, ip);
        }
    }
    routes
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
pub async fn run(client: kube::Client, me: String) {
    let api: Api<Node> = Api::all(client);
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Node>> = None;
    let mut last: Option<BTreeMap<Ipv4Network, Ipv4Addr>> = None;
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
        let want = desired(&list, &me);
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
        let want = desired(&nodes, "a");
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
