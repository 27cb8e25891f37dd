//! Permanent neighbour (ARP) entries and bridge forwarding database (FDB) entries of one link:
//! what an overlay device needs to reach its peers without learning or flooding.

use std::io;
use std::net::Ipv4Addr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::RouteType;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::{is_not_found, Netlink};

/// A hardware (MAC) address.
pub type Mac = [u8; 6];

fn message(family: AddressFamily, link: u32) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = family;
    msg.header.ifindex = link;
    msg.header.state = NeighbourState::Permanent;
    msg.header.kind = RouteType::Unicast;
    msg
}

fn mac_of(attrs: &[NeighbourAttribute]) -> Option<Mac> {
    attrs.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(bytes) => Mac::try_from(bytes.as_slice()).ok(),
        _ => None,
    })
}

/// The IPv4 destination; in AF_BRIDGE messages it arrives as raw bytes.
fn ipv4_of(attrs: &[NeighbourAttribute]) -> Option<Ipv4Addr> {
    attrs.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(*ip),
        NeighbourAttribute::Destination(NeighbourAddress::Other(bytes)) => {
            <[u8; 4]>::try_from(bytes.as_slice())
                .ok()
                .map(Ipv4Addr::from)
        }
        _ => None,
    })
}

fn dump(nl: &mut Netlink, family: AddressFamily, link: u32) -> io::Result<Vec<NeighbourMessage>> {
    let mut request = NeighbourMessage::default();
    request.header.family = family;
    Ok(nl
        .dump(RouteNetlinkMessage::GetNeighbour(request))?
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewNeighbour(n) if n.header.ifindex == link => Some(n),
            _ => None,
        })
        .collect())
}

fn delete(nl: &mut Netlink, msg: NeighbourMessage) -> io::Result<bool> {
    match nl.request(RouteNetlinkMessage::DelNeighbour(msg), 0) {
        Ok(()) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `ip neigh replace <ip> lladdr <mac> dev <link> nud permanent`.
pub fn replace_neighbour(nl: &mut Netlink, link: u32, ip: Ipv4Addr, mac: Mac) -> io::Result<()> {
    let mut msg = message(AddressFamily::Inet, link);
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    nl.request(
        RouteNetlinkMessage::NewNeighbour(msg),
        NLM_F_CREATE | NLM_F_REPLACE,
    )
}

/// `ip neigh del <ip> dev <link>`; Ok(false) when there was none.
pub fn delete_neighbour(nl: &mut Netlink, link: u32, ip: Ipv4Addr) -> io::Result<bool> {
    let mut msg = message(AddressFamily::Inet, link);
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
    delete(nl, msg)
}

/// The permanent IPv4 neighbour entries of `link`.
pub fn list_neighbours(nl: &mut Netlink, link: u32) -> io::Result<Vec<(Ipv4Addr, Mac)>> {
    Ok(dump(nl, AddressFamily::Inet, link)?
        .iter()
        .filter(|n| n.header.state == NeighbourState::Permanent)
        .filter_map(|n| Some((ipv4_of(&n.attributes)?, mac_of(&n.attributes)?)))
        .collect())
}

fn fdb_message(link: u32, mac: Mac, dst: Ipv4Addr) -> NeighbourMessage {
    let mut msg = message(AddressFamily::Bridge, link);
    // NTF_SELF: the entry belongs to the device itself (the vxlan FDB), not to a bridge above it.
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
    msg.attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(dst)));
    msg
}

/// `bridge fdb replace <mac> dev <link> dst <dst> self permanent`.
pub fn replace_fdb(nl: &mut Netlink, link: u32, mac: Mac, dst: Ipv4Addr) -> io::Result<()> {
    nl.request(
        RouteNetlinkMessage::NewNeighbour(fdb_message(link, mac, dst)),
        NLM_F_CREATE | NLM_F_REPLACE,
    )
}

/// `bridge fdb del <mac> dev <link> dst <dst> self`; Ok(false) when there was none.
pub fn delete_fdb(nl: &mut Netlink, link: u32, mac: Mac, dst: Ipv4Addr) -> io::Result<bool> {
    delete(nl, fdb_message(link, mac, dst))
}

/// The FDB entries of `link` that send a MAC to a remote IPv4 address (a vxlan device's).
pub fn list_fdb(nl: &mut Netlink, link: u32) -> io::Result<Vec<(Mac, Ipv4Addr)>> {
    Ok(dump(nl, AddressFamily::Bridge, link)?
        .iter()
        .filter_map(|n| Some((mac_of(&n.attributes)?, ipv4_of(&n.attributes)?)))
        .collect())
}
