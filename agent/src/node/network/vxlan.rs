//! The vxlan backend's device (flannel's vxlan backend as the model): `keelson.1`, VNI 1, UDP
//! port 8472, local address the node's InternalIP, no learning (peers come from Node objects as
//! static neighbour and FDB entries), MTU the uplink's minus the encapsulation, and the node's
//! pod CIDR network address as a /32, which peers route to as this node's VTEP.

use std::net::Ipv4Addr;

use ipnetwork::{IpNetwork, Ipv4Network};
use keelson_netlink::link::{self, VxlanSpec};
use keelson_netlink::{addr, ignore_exists, Netlink};

use super::peers::parse_mac;
use super::{Mac, NetworkError};

pub const DEVICE: &str = "keelson.1";
pub const VNI: u32 = 1;
/// The Linux default vxlan port, as flannel uses (IANA's 4789 came later).
pub const PORT: u16 = 8472;
/// Outer IPv4 (20) + UDP (8) + vxlan (8) + inner Ethernet (14) headers.
pub const OVERHEAD: u32 = 50;

/// This node's VTEP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vtep {
    pub index: u32,
    pub mac: Mac,
}

fn failed(what: String) -> impl FnOnce(std::io::Error) -> NetworkError {
    move |source| NetworkError::Netlink { what, source }
}

/// The device as this node wants it: over the link that holds `node_ip`.
pub fn spec(nl: &mut Netlink, node_ip: Ipv4Addr) -> Result<VxlanSpec, NetworkError> {
    let addrs = addr::list(nl).map_err(failed("listing addresses".into()))?;
    let uplink = addrs
        .iter()
        .find(|(_, net)| net.ip() == node_ip)
        .map(|(index, _)| *index)
        .ok_or(NetworkError::NoUplink(node_ip))?;
    let links = link::list(nl).map_err(failed("listing links".into()))?;
    let mtu = links
        .iter()
        .find(|l| l.index == uplink)
        .map(|l| l.mtu)
        .ok_or(NetworkError::NoUplink(node_ip))?;
    Ok(VxlanSpec {
        name: DEVICE.to_string(),
        vni: VNI,
        local: node_ip,
        port: PORT,
        uplink,
        mtu: mtu.saturating_sub(OVERHEAD),
        learning: false,
    })
}

/// Creates the device, or adopts the one an earlier run left when it was made the same way
/// (keeping its MAC, which peers already know); then MTU, the VTEP address, up.
pub fn ensure(
    nl: &mut Netlink,
    node_ip: Ipv4Addr,
    pod_cidr: Ipv4Network,
) -> Result<Vtep, NetworkError> {
    let spec = spec(nl, node_ip)?;
    let read = || failed(format!("reading {DEVICE}"));
    let existing = link::get_vxlan(nl, DEVICE).map_err(read())?;
    let adopt = matches!(&existing, Some((_, Some(s))) if s.matches(&spec));
    if existing.is_some() && !adopt {
        tracing::info!(
            device = DEVICE,
            "recreating the vxlan device: made with other settings"
        );
        link::delete(nl, DEVICE).map_err(failed(format!("deleting {DEVICE}")))?;
    }
    if !adopt {
        ignore_exists(link::create_vxlan(nl, &spec))
            .map_err(failed(format!("creating {DEVICE}")))?;
    }
    let (dev, _) = link::get_vxlan(nl, DEVICE)
        .map_err(read())?
        .ok_or_else(|| NetworkError::Vanished(DEVICE.to_string()))?;
    if dev.mtu != spec.mtu {
        link::set_mtu(nl, dev.index, spec.mtu)
            .map_err(failed(format!("setting {DEVICE}'s MTU")))?;
    }
    set_address(nl, dev.index, pod_cidr.network())?;
    if !dev.up {
        link::set_up(nl, dev.index, false).map_err(failed(format!("bringing {DEVICE} up")))?;
    }
    let mac = parse_mac(&dev.mac).map_err(NetworkError::Mac)?;
    Ok(Vtep {
        index: dev.index,
        mac,
    })
}

/// Exactly `ip`/32 on the device (a pod CIDR that changed leaves an old address behind).
fn set_address(nl: &mut Netlink, index: u32, ip: Ipv4Addr) -> Result<(), NetworkError> {
    let want = IpNetwork::V4(Ipv4Network::from(ip));
    let addrs = addr::list(nl).map_err(failed("listing addresses".into()))?;
    for (_, old) in addrs.iter().filter(|(i, a)| *i == index && *a != want) {
        addr::delete(nl, index, *old).map_err(failed(format!("removing {old} from {DEVICE}")))?;
    }
    if !addrs.contains(&(index, want)) {
        ignore_exists(addr::add(nl, index, want))
            .map_err(failed(format!("adding {want} to {DEVICE}")))?;
    }
    Ok(())
}

/// Removes the device (and with it its routes, neighbour and FDB entries) when the node no
/// longer runs the vxlan backend. Ok(false) when there was none.
pub fn remove(nl: &mut Netlink) -> Result<bool, NetworkError> {
    link::delete(nl, DEVICE).map_err(failed(format!("deleting {DEVICE}")))
}
