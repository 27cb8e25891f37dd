//! The node's routes, neighbour and FDB entries as far as the agent touches them, behind the
//! `NetworkTable` trait (netlink here, a recording fake in unit tests), and `sync`, which brings
//! them to what `peers::desired` wants. Only routes tagged with the agent's route protocol and
//! entries on its own vxlan device are ever changed or removed.

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;

use ipnetwork::{IpNetwork, Ipv4Network};
use keelson_netlink::{addr, neigh, route, Netlink};

use super::peers::{Desired, Hop};
use super::{Mac, NetworkError};

/// Route protocol number marking Keelson's routes (`ip route show proto 252`).
pub const PROTO: u8 = 252;

pub trait NetworkTable {
    /// The routes the agent installed earlier.
    fn routes(&mut self) -> io::Result<BTreeMap<Ipv4Network, Hop>>;
    fn replace_route(&mut self, dst: Ipv4Network, hop: Hop) -> io::Result<()>;
    fn delete_route(&mut self, dst: Ipv4Network) -> io::Result<()>;
    /// Permanent neighbour entries on the vxlan device (none without one).
    fn neighbours(&mut self) -> io::Result<BTreeMap<Ipv4Addr, Mac>>;
    fn replace_neighbour(&mut self, ip: Ipv4Addr, mac: Mac) -> io::Result<()>;
    fn delete_neighbour(&mut self, ip: Ipv4Addr) -> io::Result<()>;
    /// FDB entries on the vxlan device: VTEP MAC -> the peer's InternalIP.
    fn fdb(&mut self) -> io::Result<BTreeMap<Mac, Ipv4Addr>>;
    fn replace_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()>;
    fn delete_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()>;
}

fn failed(what: String) -> impl FnOnce(io::Error) -> NetworkError {
    move |source| NetworkError::Netlink { what, source }
}

/// Brings the table to `want`: new FDB and neighbour entries before the routes that use them,
/// stale routes removed before their entries. Returns the number of changes; a single entry
/// that fails is logged and the rest still applied.
pub fn sync(table: &mut dyn NetworkTable, want: &Desired) -> Result<usize, NetworkError> {
    let mut changes = 0;
    let mut count = |what: String, r: io::Result<()>| match r {
        Ok(()) => changes += 1,
        Err(e) => tracing::warn!(error = %e, "{what} failed"),
    };
    let fdb = table.fdb().map_err(failed("listing FDB entries".into()))?;
    for (mac, dst) in changed(&want.fdb, &fdb) {
        count(format!("FDB entry for {dst}"), table.replace_fdb(mac, dst));
    }
    let neighbours = table
        .neighbours()
        .map_err(failed("listing neighbour entries".into()))?;
    for (ip, mac) in changed(&want.neighbours, &neighbours) {
        count(
            format!("neighbour entry {ip}"),
            table.replace_neighbour(ip, mac),
        );
    }
    let routes = table.routes().map_err(failed("listing routes".into()))?;
    for (dst, hop) in changed(&want.routes, &routes) {
        count(
            format!("route to {dst} {hop:?}"),
            table.replace_route(dst, hop),
        );
    }
    for dst in stale(&want.routes, &routes) {
        count(format!("removing route to {dst}"), table.delete_route(dst));
    }
    for ip in stale(&want.neighbours, &neighbours) {
        count(
            format!("removing neighbour {ip}"),
            table.delete_neighbour(ip),
        );
    }
    for mac in stale(&want.fdb, &fdb) {
        let dst = fdb.get(&mac).copied().unwrap_or(Ipv4Addr::UNSPECIFIED);
        count(
            format!("removing FDB entry {dst}"),
            table.delete_fdb(mac, dst),
        );
    }
    Ok(changes)
}

/// Entries of `want` missing from `have` or different there.
fn changed<K: Ord + Copy, V: PartialEq + Copy>(
    want: &BTreeMap<K, V>,
    have: &BTreeMap<K, V>,
) -> Vec<(K, V)> {
    want.iter()
        .filter(|(k, v)| have.get(k) != Some(v))
        .map(|(k, v)| (*k, *v))
        .collect()
}

/// Keys of `have` that `want` no longer holds.
fn stale<K: Ord + Copy, V>(want: &BTreeMap<K, V>, have: &BTreeMap<K, V>) -> Vec<K> {
    have.keys()
        .filter(|k| !want.contains_key(k))
        .copied()
        .collect()
}

/// The table over rtnetlink, in the agent's network namespace.
pub struct Kernel {
    nl: Netlink,
    /// The vxlan device's index, when the backend has one.
    vxlan: Option<u32>,
}

impl Kernel {
    pub fn open(vxlan: Option<u32>) -> Result<Kernel, NetworkError> {
        let nl = Netlink::open().map_err(failed("opening a netlink socket".into()))?;
        Ok(Kernel { nl, vxlan })
    }

    pub fn netlink(&mut self) -> &mut Netlink {
        &mut self.nl
    }

    /// The subnets of this node's IPv4 addresses: its L2 segments. The pod network (the pod
    /// bridge, the vxlan device's /32) is left out: no node sits there.
    pub fn connected(&mut self, cluster: Ipv4Network) -> Result<Vec<Ipv4Network>, NetworkError> {
        let addrs = addr::list(&mut self.nl).map_err(failed("listing addresses".into()))?;
        Ok(addrs
            .into_iter()
            .filter_map(|(_, net)| match net {
                IpNetwork::V4(v4) if v4.prefix() < 32 => {
                    Ipv4Network::new(v4.network(), v4.prefix()).ok()
                }
                _ => None,
            })
            .filter(|net| !net.ip().is_loopback() && !cluster.contains(net.network()))
            .collect())
    }

    fn vxlan_dev(&self) -> io::Result<u32> {
        self.vxlan
            .ok_or_else(|| io::Error::other("no vxlan device (the backend is host-gw)"))
    }
}

impl NetworkTable for Kernel {
    fn routes(&mut self) -> io::Result<BTreeMap<Ipv4Network, Hop>> {
        let vxlan = self.vxlan;
        Ok(route::list_tagged(&mut self.nl, PROTO)?
            .into_iter()
            .map(|r| {
                let hop = match r.onlink_dev {
                    Some(dev) if Some(dev) == vxlan => Hop::Vxlan(r.via),
                    _ => Hop::Gateway(r.via),
                };
                (r.dst, hop)
            })
            .collect())
    }

    fn replace_route(&mut self, dst: Ipv4Network, hop: Hop) -> io::Result<()> {
        let (via, onlink_dev) = match hop {
            Hop::Gateway(via) => (via, None),
            Hop::Vxlan(via) => (via, Some(self.vxlan_dev()?)),
        };
        let r = route::TaggedRoute {
            dst,
            via,
            onlink_dev,
        };
        route::replace_tagged(&mut self.nl, PROTO, &r)
    }

    fn delete_route(&mut self, dst: Ipv4Network) -> io::Result<()> {
        route::delete_tagged(&mut self.nl, PROTO, dst).map(|_| ())
    }

    fn neighbours(&mut self) -> io::Result<BTreeMap<Ipv4Addr, Mac>> {
        match self.vxlan {
            Some(dev) => Ok(neigh::list_neighbours(&mut self.nl, dev)?
                .into_iter()
                .collect()),
            None => Ok(BTreeMap::new()),
        }
    }

    fn replace_neighbour(&mut self, ip: Ipv4Addr, mac: Mac) -> io::Result<()> {
        let dev = self.vxlan_dev()?;
        neigh::replace_neighbour(&mut self.nl, dev, ip, mac)
    }

    fn delete_neighbour(&mut self, ip: Ipv4Addr) -> io::Result<()> {
        let dev = self.vxlan_dev()?;
        neigh::delete_neighbour(&mut self.nl, dev, ip).map(|_| ())
    }

    fn fdb(&mut self) -> io::Result<BTreeMap<Mac, Ipv4Addr>> {
        match self.vxlan {
            Some(dev) => Ok(neigh::list_fdb(&mut self.nl, dev)?.into_iter().collect()),
            None => Ok(BTreeMap::new()),
        }
    }

    fn replace_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()> {
        let dev = self.vxlan_dev()?;
        neigh::replace_fdb(&mut self.nl, dev, mac, dst)
    }

    fn delete_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()> {
        let dev = self.vxlan_dev()?;
        neigh::delete_fdb(&mut self.nl, dev, mac, dst).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records calls and holds the entries in memory.
    #[derive(Default)]
    struct Fake {
        routes: BTreeMap<Ipv4Network, Hop>,
        neighbours: BTreeMap<Ipv4Addr, Mac>,
        fdb: BTreeMap<Mac, Ipv4Addr>,
        calls: Vec<String>,
    }

    impl NetworkTable for Fake {
        fn routes(&mut self) -> io::Result<BTreeMap<Ipv4Network, Hop>> {
            Ok(self.routes.clone())
        }
        fn replace_route(&mut self, dst: Ipv4Network, hop: Hop) -> io::Result<()> {
            self.calls.push(format!("route replace {dst} {hop:?}"));
            self.routes.insert(dst, hop);
            Ok(())
        }
        fn delete_route(&mut self, dst: Ipv4Network) -> io::Result<()> {
            self.calls.push(format!("route del {dst}"));
            self.routes.remove(&dst);
            Ok(())
        }
        fn neighbours(&mut self) -> io::Result<BTreeMap<Ipv4Addr, Mac>> {
            Ok(self.neighbours.clone())
        }
        fn replace_neighbour(&mut self, ip: Ipv4Addr, mac: Mac) -> io::Result<()> {
            self.calls
                .push(format!("neigh replace {ip} {:02x}", mac[5]));
            self.neighbours.insert(ip, mac);
            Ok(())
        }
        fn delete_neighbour(&mut self, ip: Ipv4Addr) -> io::Result<()> {
            self.calls.push(format!("neigh del {ip}"));
            self.neighbours.remove(&ip);
            Ok(())
        }
        fn fdb(&mut self) -> io::Result<BTreeMap<Mac, Ipv4Addr>> {
            Ok(self.fdb.clone())
        }
        fn replace_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()> {
            self.calls.push(format!("fdb replace {:02x} {dst}", mac[5]));
            self.fdb.insert(mac, dst);
            Ok(())
        }
        fn delete_fdb(&mut self, mac: Mac, dst: Ipv4Addr) -> io::Result<()> {
            self.calls.push(format!("fdb del {:02x} {dst}", mac[5]));
            self.fdb.remove(&mac);
            Ok(())
        }
    }

    fn net(s: &str) -> Ipv4Network {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn vxlan_peer(want: &mut Desired, cidr: &str, node_ip: &str, last: u8) {
        let cidr = net(cidr);
        let mac = [2, 0, 0, 0, 0, last];
        want.routes.insert(cidr, Hop::Vxlan(cidr.network()));
        want.neighbours.insert(cidr.network(), mac);
        want.fdb.insert(mac, ip(node_ip));
    }

    #[test]
    fn entries_before_routes_and_stale_state_removed() {
        let mut table = Fake::default();
        // Left by an earlier run: a host-gw route and a vxlan peer that has gone.
        table
            .routes
            .insert(net("10.244.9.0/24"), Hop::Gateway(ip("172.31.0.9")));
        let mut old = Desired::default();
        vxlan_peer(&mut old, "10.244.8.0/24", "172.30.0.8", 8);
        table.routes.extend(old.routes);
        table.neighbours.extend(old.neighbours);
        table.fdb.extend(old.fdb);

        let mut want = Desired::default();
        want.routes
            .insert(net("10.244.2.0/24"), Hop::Gateway(ip("172.31.0.2")));
        vxlan_peer(&mut want, "10.244.3.0/24", "172.30.0.3", 3);
        assert_eq!(sync(&mut table, &want).unwrap(), 8);
        assert_eq!(
            table.calls,
            [
                "fdb replace 03 172.30.0.3",
                "neigh replace 10.244.3.0 03",
                "route replace 10.244.2.0/24 Gateway(172.31.0.2)",
                "route replace 10.244.3.0/24 Vxlan(10.244.3.0)",
                "route del 10.244.8.0/24",
                "route del 10.244.9.0/24",
                "neigh del 10.244.8.0",
                "fdb del 08 172.30.0.8",
            ]
        );
        // In step already: nothing to do.
        table.calls.clear();
        assert_eq!(sync(&mut table, &want).unwrap(), 0);
        assert!(table.calls.is_empty());
    }

    #[test]
    fn a_peer_that_moved_is_replaced_in_place() {
        let mut table = Fake::default();
        let mut want = Desired::default();
        vxlan_peer(&mut want, "10.244.3.0/24", "172.30.0.3", 3);
        sync(&mut table, &want).unwrap();
        table.calls.clear();
        // Same node, new InternalIP and a new VTEP (its device was recreated).
        let mut moved = Desired::default();
        vxlan_peer(&mut moved, "10.244.3.0/24", "172.30.0.33", 4);
        sync(&mut table, &moved).unwrap();
        assert_eq!(
            table.calls,
            [
                "fdb replace 04 172.30.0.33",
                "neigh replace 10.244.3.0 04",
                "fdb del 03 172.30.0.3",
            ]
        );
    }
}
