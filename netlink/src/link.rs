//! Links: bridge, veth pair, vxlan device, up/down, MTU, hairpin, delete, look-up by name.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoPortKind, InfoVeth, InfoVxlan,
    LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::RouteNetlinkMessage;

use super::{is_not_found, Netlink};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDetails {
    pub index: u32,
    pub name: String,
    pub mac: String,
    pub mtu: u32,
    pub up: bool,
    pub master: Option<u32>,
    pub kind: Option<String>,
}

pub fn format_mac(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn details(msg: &LinkMessage) -> LinkDetails {
    let mut d = LinkDetails {
        index: msg.header.index,
        name: String::new(),
        mac: String::new(),
        mtu: 0,
        up: msg.header.flags.contains(LinkFlags::Up),
        master: None,
        kind: None,
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => d.name = n.clone(),
            LinkAttribute::Address(a) => d.mac = format_mac(a),
            LinkAttribute::Mtu(m) => d.mtu = *m,
            LinkAttribute::Controller(m) => d.master = Some(*m),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Kind(k) = info {
                        d.kind = Some(k.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    d
}

fn named(name: &str) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    msg
}

fn with_up(mut msg: LinkMessage) -> LinkMessage {
    msg.header.flags |= LinkFlags::Up;
    msg.header.change_mask |= LinkFlags::Up;
    msg
}

pub fn get(nl: &mut Netlink, name: &str) -> io::Result<Option<LinkDetails>> {
    match nl.get(RouteNetlinkMessage::GetLink(named(name))) {
        Ok(RouteNetlinkMessage::NewLink(msg)) => Ok(Some(details(&msg))),
        Ok(_) => Ok(None),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn list(nl: &mut Netlink) -> io::Result<Vec<LinkDetails>> {
    Ok(nl
        .dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?
        .iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(details(l)),
            _ => None,
        })
        .collect())
}

/// Creates a bridge that is up; EEXIST when it already exists.
pub fn create_bridge(
    nl: &mut Netlink,
    name: &str,
    mtu: Option<u32>,
    promisc: bool,
) -> io::Result<()> {
    let mut msg = with_up(named(name));
    if promisc {
        msg.header.flags |= LinkFlags::Promisc;
        msg.header.change_mask |= LinkFlags::Promisc;
    }
    if let Some(mtu) = mtu {
        msg.attributes.push(LinkAttribute::Mtu(mtu));
    }
    msg.attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
            InfoKind::Bridge,
        )]));
    nl.request(RouteNetlinkMessage::NewLink(msg), NLM_F_CREATE | NLM_F_EXCL)
}

/// Sets flags on an existing link: up, and promiscuous when asked.
pub fn set_up(nl: &mut Netlink, index: u32, promisc: bool) -> io::Result<()> {
    let mut msg = with_up(LinkMessage::default());
    msg.header.index = index;
    if promisc {
        msg.header.flags |= LinkFlags::Promisc;
        msg.header.change_mask |= LinkFlags::Promisc;
    }
    nl.request(RouteNetlinkMessage::SetLink(msg), 0)
}

pub fn set_down(nl: &mut Netlink, index: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg.header.change_mask |= LinkFlags::Up;
    nl.request(RouteNetlinkMessage::SetLink(msg), 0)
}

/// What the veth pair looks like: host side on the bridge, peer created directly inside the
/// container's namespace under its final name. The host side comes up at creation; the peer
/// cannot (the kernel opens it before the pair is linked, which fails with ENOTCONN), so the
/// caller brings it up with `set_up` in the container's namespace.
pub struct VethSpec<'a> {
    pub host_name: &'a str,
    pub master: u32,
    pub mtu: Option<u32>,
    pub peer_name: &'a str,
    pub peer_netns: RawFd,
}

pub fn create_veth(nl: &mut Netlink, spec: &VethSpec) -> io::Result<()> {
    let mut peer = named(spec.peer_name);
    peer.attributes
        .push(LinkAttribute::NetNsFd(spec.peer_netns));
    let mut host = with_up(named(spec.host_name));
    // No queue length, like the reference plugin's pairs (veth has no qdisc anyway).
    peer.attributes.push(LinkAttribute::TxQueueLen(0));
    host.attributes.push(LinkAttribute::TxQueueLen(0));
    if let Some(mtu) = spec.mtu {
        peer.attributes.push(LinkAttribute::Mtu(mtu));
        host.attributes.push(LinkAttribute::Mtu(mtu));
    }
    host.attributes.push(LinkAttribute::Controller(spec.master));
    host.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    nl.request(
        RouteNetlinkMessage::NewLink(host),
        NLM_F_CREATE | NLM_F_EXCL,
    )
}

/// `ip link set <index> type bridge_slave hairpin on`.
pub fn set_hairpin(nl: &mut Netlink, index: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::PortKind(InfoPortKind::Bridge),
        LinkInfo::PortData(InfoPortData::BridgePort(vec![InfoBridgePort::HairpinMode(
            true,
        )])),
    ]));
    nl.request(RouteNetlinkMessage::NewLink(msg), 0)
}

/// Deletes a link by name; Ok(false) when there was none.
pub fn delete(nl: &mut Netlink, name: &str) -> io::Result<bool> {
    match nl.request(RouteNetlinkMessage::DelLink(named(name)), 0) {
        Ok(()) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes a link by index; Ok(false) when there was none.
pub fn delete_index(nl: &mut Netlink, index: u32) -> io::Result<bool> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    match nl.request(RouteNetlinkMessage::DelLink(msg), 0) {
        Ok(()) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Takes a link down and moves it to `group`, marking it for a batched delete.
pub fn retire(nl: &mut Netlink, index: u32, group: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg.header.change_mask |= LinkFlags::Up;
    msg.attributes.push(LinkAttribute::Group(group));
    nl.request(RouteNetlinkMessage::SetLink(msg), 0)
}

/// Deletes every link in `group` in one kernel batch (one set of RCU waits for all).
pub fn delete_group(nl: &mut Netlink, group: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    match nl.request(RouteNetlinkMessage::DelLink(msg), 0) {
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(()),
    }
}

/// A vxlan device as an overlay backend wants it: unicast only (no group), remote ends from
/// static FDB entries, so no learning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSpec {
    pub name: String,
    pub vni: u32,
    pub local: Ipv4Addr,
    pub port: u16,
    /// The uplink the encapsulated packets leave by.
    pub uplink: u32,
    pub mtu: u32,
    pub learning: bool,
}

/// What an existing vxlan device was made with (as far as `VxlanSpec` says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSettings {
    pub vni: Option<u32>,
    pub local: Option<Ipv4Addr>,
    pub port: Option<u16>,
    pub learning: Option<bool>,
    pub uplink: Option<u32>,
}

impl VxlanSettings {
    /// Whether a device with these settings can serve as `spec` (the MTU may be set later).
    pub fn matches(&self, spec: &VxlanSpec) -> bool {
        self.vni == Some(spec.vni)
            && self.local == Some(spec.local)
            && self.port == Some(spec.port)
            && self.learning == Some(spec.learning)
            && self.uplink == Some(spec.uplink)
    }
}

/// `ip link add <name> mtu M type vxlan id VNI local IP dev UPLINK dstport PORT nolearning`,
/// down (the caller brings it up once addressed); EEXIST when present.
pub fn create_vxlan(nl: &mut Netlink, spec: &VxlanSpec) -> io::Result<()> {
    let mut msg = named(&spec.name);
    msg.attributes.push(LinkAttribute::Mtu(spec.mtu));
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Vxlan),
        LinkInfo::Data(InfoData::Vxlan(vec![
            InfoVxlan::Id(spec.vni),
            InfoVxlan::Local(spec.local),
            InfoVxlan::Link(spec.uplink),
            InfoVxlan::Port(spec.port),
            InfoVxlan::Learning(spec.learning),
        ])),
    ]));
    nl.request(RouteNetlinkMessage::NewLink(msg), NLM_F_CREATE | NLM_F_EXCL)
}

/// The link named `name` and, when it is a vxlan device, its settings.
pub fn get_vxlan(
    nl: &mut Netlink,
    name: &str,
) -> io::Result<Option<(LinkDetails, Option<VxlanSettings>)>> {
    let msg = match nl.get(RouteNetlinkMessage::GetLink(named(name))) {
        Ok(RouteNetlinkMessage::NewLink(msg)) => msg,
        Ok(_) => return Ok(None),
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut settings = None;
    for attr in &msg.attributes {
        let LinkAttribute::LinkInfo(infos) = attr else {
            continue;
        };
        for info in infos {
            if let LinkInfo::Data(InfoData::Vxlan(data)) = info {
                settings = Some(vxlan_settings(data));
            }
        }
    }
    Ok(Some((details(&msg), settings)))
}

fn vxlan_settings(data: &[InfoVxlan]) -> VxlanSettings {
    let mut s = VxlanSettings {
        vni: None,
        local: None,
        port: None,
        learning: None,
        uplink: None,
    };
    for d in data {
        match d {
            InfoVxlan::Id(v) => s.vni = Some(*v),
            InfoVxlan::Local(v) => s.local = Some(*v),
            InfoVxlan::Port(v) => s.port = Some(*v),
            InfoVxlan::Learning(v) => s.learning = Some(*v),
            InfoVxlan::Link(v) => s.uplink = Some(*v),
            _ => {}
        }
    }
    s
}

/// `ip link set <index> mtu <mtu>`.
pub fn set_mtu(nl: &mut Netlink, index: u32, mtu: u32) -> io::Result<()> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg.attributes.push(LinkAttribute::Mtu(mtu));
    nl.request(RouteNetlinkMessage::SetLink(msg), 0)
}
