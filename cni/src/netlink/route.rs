//! Routes in the main table.

use std::io;
use std::net::IpAddr;

use ipnetwork::IpNetwork;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::Netlink;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteDetails {
    pub dst: IpNetwork,
    pub gw: Option<IpAddr>,
    pub oif: Option<u32>,
}

fn route_address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    }
}

fn from_route_address(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Adds a route (out of `oif` when given, via `gw` when given); EEXIST when present.
pub fn add(nl: &mut Netlink, r: &RouteDetails) -> io::Result<()> {
    let RouteDetails { dst, gw, oif } = *r;
    let mut msg = RouteMessage::default();
    msg.header.address_family = if dst.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    msg.header.destination_prefix_length = dst.prefix();
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::Boot;
    msg.header.scope = if gw.is_some() {
        RouteScope::Universe
    } else {
        RouteScope::Link
    };
    msg.header.kind = RouteType::Unicast;
    if dst.prefix() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(route_address(dst.network())));
    }
    if let Some(gw) = gw {
        msg.attributes
            .push(RouteAttribute::Gateway(route_address(gw)));
    }
    if let Some(oif) = oif {
        msg.attributes.push(RouteAttribute::Oif(oif));
    }
    nl.request(
        RouteNetlinkMessage::NewRoute(msg),
        NLM_F_CREATE | NLM_F_EXCL,
    )
}

/// Unicast routes of the main table in both families.
pub fn list(nl: &mut Netlink) -> io::Result<Vec<RouteDetails>> {
    let mut out = Vec::new();
    for m in nl.dump(RouteNetlinkMessage::GetRoute(RouteMessage::default()))? {
        let RouteNetlinkMessage::NewRoute(r) = m else {
            continue;
        };
        if r.header.table != RouteHeader::RT_TABLE_MAIN || r.header.kind != RouteType::Unicast {
            continue;
        }
        let v4 = r.header.address_family == AddressFamily::Inet;
        // A default route carries no destination attribute.
        let mut dst_ip: IpAddr = if v4 {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        };
        let mut gw = None;
        let mut oif = None;
        for attr in &r.attributes {
            match attr {
                RouteAttribute::Destination(a) => dst_ip = from_route_address(a).unwrap_or(dst_ip),
                RouteAttribute::Gateway(a) => gw = from_route_address(a),
                RouteAttribute::Oif(i) => oif = Some(*i),
                _ => {}
            }
        }
        if let Ok(dst) = IpNetwork::new(dst_ip, r.header.destination_prefix_length) {
            out.push(RouteDetails { dst, gw, oif });
        }
    }
    Ok(out)
}
