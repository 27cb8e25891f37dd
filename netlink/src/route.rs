//! Routes in the main table: the plugin's own (`add`, `list`), and routes tagged with a route
//! protocol number for the node agent (`*_tagged`).

use std::io;
use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::{IpNetwork, Ipv4Network};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
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

/// An IPv4 route owned by one program, marked with its route protocol number (as
/// `ip route ... proto N`), so that listing and removing never touches anyone else's routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedRoute {
    pub dst: Ipv4Network,
    pub via: Ipv4Addr,
    /// Out of this link with the gateway taken as on-link (`dev X onlink`): the gateway need not
    /// be inside any of the link's subnets, as with a vxlan device's /32 address.
    pub onlink_dev: Option<u32>,
}

fn tagged_message(proto: u8, dst: Ipv4Network) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = AddressFamily::Inet;
    msg.header.destination_prefix_length = dst.prefix();
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::from(proto);
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = RouteType::Unicast;
    msg.attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(
            dst.network(),
        )));
    msg
}

/// `ip route replace <dst> via <via> [dev X onlink] proto <proto>`.
pub fn replace_tagged(nl: &mut Netlink, proto: u8, r: &TaggedRoute) -> io::Result<()> {
    let mut msg = tagged_message(proto, r.dst);
    msg.attributes
        .push(RouteAttribute::Gateway(RouteAddress::Inet(r.via)));
    if let Some(dev) = r.onlink_dev {
        msg.header.flags |= RouteFlags::Onlink;
        msg.attributes.push(RouteAttribute::Oif(dev));
    }
    nl.request(
        RouteNetlinkMessage::NewRoute(msg),
        NLM_F_CREATE | NLM_F_REPLACE,
    )
}

/// `ip route del <dst> proto <proto>`; Ok(false) when there was no such route.
pub fn delete_tagged(nl: &mut Netlink, proto: u8, dst: Ipv4Network) -> io::Result<bool> {
    match nl.request(RouteNetlinkMessage::DelRoute(tagged_message(proto, dst)), 0) {
        Ok(()) => Ok(true),
        Err(e) if super::is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The IPv4 routes of the main table with protocol `proto` that have a gateway.
pub fn list_tagged(nl: &mut Netlink, proto: u8) -> io::Result<Vec<TaggedRoute>> {
    let mut request = RouteMessage::default();
    request.header.address_family = AddressFamily::Inet;
    let mut out = Vec::new();
    for m in nl.dump(RouteNetlinkMessage::GetRoute(request))? {
        let RouteNetlinkMessage::NewRoute(r) = m else {
            continue;
        };
        if r.header.table != RouteHeader::RT_TABLE_MAIN
            || u8::from(r.header.protocol) != proto
            || r.header.address_family != AddressFamily::Inet
        {
            continue;
        }
        let mut dst_ip = Ipv4Addr::UNSPECIFIED;
        let (mut via, mut oif) = (None, None);
        for attr in &r.attributes {
            match attr {
                RouteAttribute::Destination(RouteAddress::Inet(a)) => dst_ip = *a,
                RouteAttribute::Gateway(RouteAddress::Inet(a)) => via = Some(*a),
                RouteAttribute::Oif(i) => oif = Some(*i),
                _ => {}
            }
        }
        let onlink = r.header.flags.contains(RouteFlags::Onlink);
        if let (Some(via), Ok(dst)) = (
            via,
            Ipv4Network::new(dst_ip, r.header.destination_prefix_length),
        ) {
            let onlink_dev = if onlink { oif } else { None };
            out.push(TaggedRoute {
                dst,
                via,
                onlink_dev,
            });
        }
    }
    Ok(out)
}

/// Route protocol number of the plugin's `unreachable` routes (`ip route show proto 251`).
pub const UNREACHABLE_PROTO: u8 = 251;

fn unreachable_message(ip: IpAddr) -> RouteMessage {
    let mut msg = RouteMessage::default();
    let (family, len) = match ip {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    msg.header.address_family = family;
    msg.header.destination_prefix_length = len;
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::from(UNREACHABLE_PROTO);
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = RouteType::Unreachable;
    msg.attributes
        .push(RouteAttribute::Destination(route_address(ip)));
    msg
}

/// `ip route replace unreachable <ip> proto 251`.
pub fn replace_unreachable(nl: &mut Netlink, ip: IpAddr) -> io::Result<()> {
    nl.request(
        RouteNetlinkMessage::NewRoute(unreachable_message(ip)),
        NLM_F_CREATE | NLM_F_REPLACE,
    )
}

/// `ip route del unreachable <ip> proto 251`: only that route, never a route someone else made
/// for the address; Ok(false) when there was none.
pub fn delete_unreachable(nl: &mut Netlink, ip: IpAddr) -> io::Result<bool> {
    match nl.request(RouteNetlinkMessage::DelRoute(unreachable_message(ip)), 0) {
        Ok(()) => Ok(true),
        Err(e) if super::is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
