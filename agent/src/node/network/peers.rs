//! What the node's network should hold for its peers, from the Node objects. Pure.
//!
//! host-gw: a route to each peer's pod CIDR via its InternalIP, possible only when that address
//! is on a directly connected subnet (the next hop must be on this node's L2 segment).
//! vxlan (flannel's vxlan backend): a route to the peer's pod CIDR via the peer's VTEP address
//! (its pod CIDR's network address) on the vxlan device, with a permanent neighbour entry giving
//! that address the peer's VTEP MAC, and an FDB entry sending that MAC to the peer's InternalIP.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;
use keelson_apimachinery::well_known::{BACKEND_TYPE_ANNOTATION, VXLAN_VTEP_MAC_ANNOTATION};

use super::{Backend, Mac};

/// The next hop of a route to a peer's pod CIDR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hop {
    /// Via the peer's InternalIP, on this node's own segment.
    Gateway(Ipv4Addr),
    /// Via the peer's VTEP address on the vxlan device (onlink).
    Vxlan(Ipv4Addr),
}

/// Routes, neighbour and FDB entries wanted, and the nodes left out (node name -> why).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Desired {
    pub routes: BTreeMap<Ipv4Network, Hop>,
    pub neighbours: BTreeMap<Ipv4Addr, Mac>,
    pub fdb: BTreeMap<Mac, Ipv4Addr>,
    pub refused: BTreeMap<String, String>,
}

/// How this node reaches its peers.
#[derive(Clone, Copy, Debug)]
pub struct Plan<'a> {
    pub me: &'a str,
    pub backend: Backend,
    /// vxlan only: a peer on a directly connected subnet gets a host-gw route.
    pub direct_routing: bool,
    pub cluster: Ipv4Network,
    /// The subnets of this node's own addresses (its L2 segments).
    pub connected: &'a [Ipv4Network],
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

/// `aa:bb:cc:dd:ee:ff`, a unicast MAC (a multicast one would flood every peer).
pub fn parse_mac(text: &str) -> Result<Mac, String> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in mac.iter_mut() {
        let part = parts.next().filter(|p| p.len() == 2);
        *byte = part
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .ok_or_else(|| format!("VTEP MAC {text:?} is not of the form aa:bb:cc:dd:ee:ff"))?;
    }
    if parts.next().is_some() {
        return Err(format!(
            "VTEP MAC {text:?} is not of the form aa:bb:cc:dd:ee:ff"
        ));
    }
    if mac[0] & 1 == 1 || mac == [0; 6] {
        return Err(format!("VTEP MAC {text} is not a unicast address"));
    }
    Ok(mac)
}

/// A peer as its Node describes it.
struct Peer {
    name: String,
    pod_cidr: Ipv4Network,
    ip: Ipv4Addr,
    /// The VTEP MAC when the node runs the vxlan backend (or why its annotation is unusable).
    vtep: Option<Result<Mac, String>>,
}

/// The peer's pod CIDR and InternalIP, when both are set; None for a node not ready for routes.
fn peer(n: &Node) -> Option<Peer> {
    let cidr = n
        .spec
        .as_ref()
        .and_then(|s| s.pod_cidr.as_deref())
        .and_then(|c| c.parse::<Ipv4Network>().ok())?;
    let ip = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        // A dual-stack node may list its IPv6 address first.
        .find_map(|a| a.address.parse::<Ipv4Addr>().ok())?;
    let annotations = n.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let vtep = (annotation(BACKEND_TYPE_ANNOTATION) == Some("vxlan"))
        .then(|| annotation(VXLAN_VTEP_MAC_ANNOTATION))
        .map(|mac| mac.ok_or_else(|| "has no VTEP MAC annotation yet".to_string()))
        .map(|mac| mac.and_then(parse_mac));
    Some(Peer {
        name: n.metadata.name.clone().unwrap_or_default(),
        // The network address: "10.244.1.7/24" is taken as 10.244.1.0/24, as `ip route` would.
        pod_cidr: Ipv4Network::new(cidr.network(), cidr.prefix()).unwrap_or(cidr),
        ip,
        vtep,
    })
}

/// Everything to install for the other nodes.
pub fn desired(nodes: &[Node], plan: &Plan) -> Desired {
    let mut out = Desired::default();
    let mut macs: BTreeMap<Mac, String> = BTreeMap::new();
    for n in nodes {
        if n.metadata.name.as_deref() == Some(plan.me) {
            continue;
        }
        let Some(p) = peer(n) else {
            continue;
        };
        let verdict = check_pod_cidr(p.pod_cidr, plan.cluster)
            .and_then(|()| check_gateway(p.ip))
            .and_then(|()| add_peer(&mut out, &mut macs, &p, plan));
        if let Err(why) = verdict {
            out.refused.insert(p.name, why);
        }
    }
    out
}

fn add_peer(
    out: &mut Desired,
    macs: &mut BTreeMap<Mac, String>,
    p: &Peer,
    plan: &Plan,
) -> Result<(), String> {
    let direct = plan.connected.iter().any(|s| s.contains(p.ip));
    let host_gw = match plan.backend {
        Backend::HostGw => true,
        Backend::Vxlan => direct && plan.direct_routing,
    };
    if host_gw {
        if !direct {
            return Err(format!(
                "InternalIP {} is not on this node's L2 segment; use --network-backend vxlan",
                p.ip
            ));
        }
        out.routes.insert(p.pod_cidr, Hop::Gateway(p.ip));
        return Ok(());
    }
    let mac = match &p.vtep {
        None => return Err("does not run the vxlan backend (no backend-type annotation)".into()),
        Some(vtep) => vtep.clone()?,
    };
    if let Some(other) = macs.get(&mac) {
        return Err(format!("VTEP MAC {mac:02x?} is also node {other}'s"));
    }
    macs.insert(mac, p.name.clone());
    let vtep_ip = p.pod_cidr.network();
    out.routes.insert(p.pod_cidr, Hop::Vxlan(vtep_ip));
    out.neighbours.insert(vtep_ip, mac);
    out.fdb.insert(mac, p.ip);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};

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

    pub(crate) fn vxlan_node(name: &str, cidr: &str, ip: &str, mac: &str) -> Node {
        let mut n = node(name, Some(cidr), ip);
        n.metadata.annotations = Some(
            [
                (BACKEND_TYPE_ANNOTATION.to_string(), "vxlan".to_string()),
                (VXLAN_VTEP_MAC_ANNOTATION.to_string(), mac.to_string()),
            ]
            .into(),
        );
        n
    }

    fn cluster() -> Ipv4Network {
        "10.244.0.0/16".parse().unwrap()
    }

    fn ip4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    const SEGMENT: &[Ipv4Network] =
        &[Ipv4Network::new_checked(Ipv4Addr::new(172, 31, 0, 0), 24).unwrap()];

    fn plan(backend: Backend, direct_routing: bool) -> Plan<'static> {
        Plan {
            me: "me",
            backend,
            direct_routing,
            cluster: cluster(),
            connected: SEGMENT,
        }
    }

    fn routes(d: &Desired) -> Vec<String> {
        d.routes
            .iter()
            .map(|(dst, hop)| format!("{dst} {hop:?}"))
            .collect()
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
            node("no-cidr", None, "172.31.0.9"),
        ];
        let got = desired(&nodes, &plan(Backend::HostGw, false));
        assert_eq!(
            routes(&got),
            [
                "10.244.2.0/24 Gateway(172.31.0.3)",
                "10.244.4.0/24 Gateway(172.31.0.8)"
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

    #[test]
    fn host_gw_refuses_a_peer_behind_a_router() {
        let nodes = vec![
            node("near", Some("10.244.2.0/24"), "172.31.0.3"),
            node("far", Some("10.244.3.0/24"), "172.30.9.3"),
        ];
        let got = desired(&nodes, &plan(Backend::HostGw, false));
        assert_eq!(routes(&got), ["10.244.2.0/24 Gateway(172.31.0.3)"]);
        // A dual-stack node listing its IPv6 InternalIP first is routed by its IPv4 one.
        let mut dual = node("dual", Some("10.244.5.0/24"), "fd00::5");
        if let Some(a) = dual.status.as_mut().and_then(|s| s.addresses.as_mut()) {
            a.push(NodeAddress {
                type_: "InternalIP".into(),
                address: "172.31.0.5".into(),
            });
        }
        let got_dual = desired(&[dual], &plan(Backend::HostGw, false));
        assert_eq!(routes(&got_dual), ["10.244.5.0/24 Gateway(172.31.0.5)"]);
        assert_eq!(
            got.refused["far"],
            "InternalIP 172.30.9.3 is not on this node's L2 segment; use --network-backend vxlan"
        );
    }

    #[test]
    fn vxlan_routes_neighbours_and_fdb_per_peer() {
        let nodes = vec![
            vxlan_node("near", "10.244.2.0/24", "172.31.0.3", "02:00:00:00:00:02"),
            vxlan_node("far", "10.244.3.0/24", "172.30.9.3", "02:00:00:00:00:03"),
            node("plain", Some("10.244.4.0/24"), "172.31.0.4"),
        ];
        let got = desired(&nodes, &plan(Backend::Vxlan, false));
        assert_eq!(
            routes(&got),
            [
                "10.244.2.0/24 Vxlan(10.244.2.0)",
                "10.244.3.0/24 Vxlan(10.244.3.0)"
            ]
        );
        let neigh: Vec<String> = got
            .neighbours
            .iter()
            .map(|(ip, mac)| format!("{ip} {mac:02x?}"))
            .collect();
        assert_eq!(
            neigh,
            [
                "10.244.2.0 [02, 00, 00, 00, 00, 02]",
                "10.244.3.0 [02, 00, 00, 00, 00, 03]"
            ]
        );
        let fdb: Vec<String> = got.fdb.values().map(|ip| ip.to_string()).collect();
        assert_eq!(fdb, ["172.31.0.3", "172.30.9.3"]);
        assert!(got.refused["plain"].contains("does not run the vxlan backend"));

        // DirectRouting: peers on the same segment get host-gw routes (the plain node too),
        // only the one behind a router goes through the overlay.
        let direct = desired(&nodes, &plan(Backend::Vxlan, true));
        assert_eq!(
            routes(&direct),
            [
                "10.244.2.0/24 Gateway(172.31.0.3)",
                "10.244.3.0/24 Vxlan(10.244.3.0)",
                "10.244.4.0/24 Gateway(172.31.0.4)"
            ]
        );
        assert_eq!(
            direct.fdb.values().collect::<Vec<_>>(),
            [&ip4("172.30.9.3")]
        );
        assert!(direct.refused.is_empty(), "{direct:?}");
    }

    #[test]
    fn bad_or_shared_vtep_macs_are_refused() {
        let nodes = vec![
            vxlan_node("a", "10.244.2.0/24", "172.30.9.2", "02:00:00:00:00:02"),
            vxlan_node("b", "10.244.3.0/24", "172.30.9.3", "02:00:00:00:00:02"),
            vxlan_node("c", "10.244.4.0/24", "172.30.9.4", "01:00:5e:00:00:01"),
            vxlan_node("d", "10.244.5.0/24", "172.30.9.5", "not-a-mac"),
        ];
        let got = desired(&nodes, &plan(Backend::Vxlan, false));
        assert_eq!(routes(&got), ["10.244.2.0/24 Vxlan(10.244.2.0)"]);
        assert!(got.refused["b"].contains("also node a's"), "{got:?}");
        assert!(got.refused["c"].contains("not a unicast"), "{got:?}");
        assert!(got.refused["d"].contains("aa:bb:cc:dd:ee:ff"), "{got:?}");
    }

    #[test]
    fn mac_text() {
        assert_eq!(
            parse_mac("0a:1B:2c:3d:4e:5f"),
            Ok([0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f])
        );
        for bad in [
            "",
            "0a:1b:2c:3d:4e",
            "0a:1b:2c:3d:4e:5f:60",
            "0a:1b:2c:3d:4e:5",
            "00:00:00:00:00:00",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
    }
}
