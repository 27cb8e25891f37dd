//! Interface addresses.

use std::io;
use std::net::IpAddr;

use ipnetwork::IpNetwork;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::address::{AddressAttribute, AddressHeaderFlags, AddressMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::Netlink;

fn family(ip: IpAddr) -> AddressFamily {
    if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

/// Adds `net` (address/prefix) to a link; EEXIST when present. IPv6 addresses skip duplicate
/// address detection so they are usable at once.
pub fn add(nl: &mut Netlink, index: u32, net: IpNetwork) -> io::Result<()> {
    let mut msg = AddressMessage::default();
    msg.header.family = family(net.ip());
    msg.header.prefix_len = net.prefix();
    msg.header.index = index;
    match net {
        IpNetwork::V4(v4) => {
            msg.attributes.push(AddressAttribute::Local(net.ip()));
            msg.attributes.push(AddressAttribute::Address(net.ip()));
            if v4.prefix() < 31 {
                msg.attributes
                    .push(AddressAttribute::Broadcast(v4.broadcast()));
            }
        }
        IpNetwork::V6(_) => {
            msg.header.flags |= AddressHeaderFlags::Nodad;
            msg.attributes.push(AddressAttribute::Address(net.ip()));
        }
    }
    nl.request(
        RouteNetlinkMessage::NewAddress(msg),
        NLM_F_CREATE | NLM_F_EXCL,
    )
}

/// All addresses as (link index, address/prefix).
pub fn list(nl: &mut Netlink) -> io::Result<Vec<(u32, IpNetwork)>> {
    let mut out = Vec::new();
    for m in nl.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))? {
        let RouteNetlinkMessage::NewAddress(a) = m else {
            continue;
        };
        let ip = a.attributes.iter().find_map(|attr| match attr {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let ip = ip.or_else(|| {
            a.attributes.iter().find_map(|attr| match attr {
                AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            })
        });
        if let Some(net) = ip.and_then(|ip| IpNetwork::new(ip, a.header.prefix_len).ok()) {
            out.push((a.header.index, net));
        }
    }
    Ok(out)
}

/// Removes `net` from a link; Ok(false) when it was not there.
pub fn delete(nl: &mut Netlink, index: u32, net: IpNetwork) -> io::Result<bool> {
    let mut msg = AddressMessage::default();
    msg.header.family = family(net.ip());
    msg.header.prefix_len = net.prefix();
    msg.header.index = index;
    if net.is_ipv4() {
        msg.attributes.push(AddressAttribute::Local(net.ip()));
    }
    msg.attributes.push(AddressAttribute::Address(net.ip()));
    match nl.request(RouteNetlinkMessage::DelAddress(msg), 0) {
        Ok(()) => Ok(true),
        Err(e) if super::is_not_found(&e) || e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
