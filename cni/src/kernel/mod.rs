//! The kernel calls the plugins make (links, addresses, routes, forwarding) behind one trait:
//! `Rtnl` sends them over rtnetlink; in unit tests an in-memory fake records them, so ADD, DEL,
//! CHECK and ADD's rollback are tested without root.

#[cfg(test)]
pub mod fake;
#[cfg(test)]
pub mod fake_firewall;
pub mod rtnl;

use ipnetwork::IpNetwork;
use std::io;
use std::net::IpAddr;

pub use keelson_netlink::link::LinkDetails;
pub use keelson_netlink::route::RouteDetails;
pub use rtnl::Rtnl;

/// Which network namespace a call goes to: the plugin's own (the node's) or the container's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Host,
    Container,
}

/// The veth pair ADD creates: the host end up and on the bridge, the peer created directly
/// inside the container's namespace under its final name (down: see `keelson_netlink::link::VethSpec`).
#[derive(Debug, Clone, Copy)]
pub struct Veth<'a> {
    pub host_name: &'a str,
    pub bridge: u32,
    pub mtu: Option<u32>,
    pub peer_name: &'a str,
}

/// Changes answer like the kernel does: EEXIST when the object is there already, ENODEV (or
/// ESRCH, ENOENT) when what they refer to is missing (see `keelson_netlink::is_exists`, `is_not_found`).
pub trait Kernel {
    /// Whether the container's namespace exists (DEL and loopback's DEL accept it gone).
    fn has_container(&self) -> bool;
    fn link(&mut self, side: Side, name: &str) -> io::Result<Option<LinkDetails>>;
    fn links(&mut self, side: Side) -> io::Result<Vec<LinkDetails>>;
    /// Every address as (link index, address/prefix).
    fn addresses(&mut self, side: Side) -> io::Result<Vec<(u32, IpNetwork)>>;
    /// Unicast routes of the main table.
    fn routes(&mut self, side: Side) -> io::Result<Vec<RouteDetails>>;
    /// A bridge in the host, up (and promiscuous when asked).
    fn create_bridge(&mut self, name: &str, mtu: Option<u32>, promisc: bool) -> io::Result<()>;
    fn create_veth(&mut self, veth: &Veth) -> io::Result<()>;
    fn set_up(&mut self, side: Side, index: u32, promisc: bool) -> io::Result<()>;
    fn set_down(&mut self, side: Side, index: u32) -> io::Result<()>;
    /// Hairpin mode on a host port of a bridge.
    fn set_hairpin(&mut self, index: u32) -> io::Result<()>;
    fn add_address(&mut self, side: Side, index: u32, net: IpNetwork) -> io::Result<()>;
    fn add_route(&mut self, side: Side, route: &RouteDetails) -> io::Result<()>;
    /// Ok(false) when there was no such link. Deleting one end of a veth pair removes both.
    fn delete_link(&mut self, side: Side, name: &str) -> io::Result<bool>;
    fn delete_link_index(&mut self, side: Side, index: u32) -> io::Result<bool>;
    /// Takes a host link down into the retired group, for `reap_retired` (see `reaper`).
    fn retire(&mut self, index: u32) -> io::Result<()>;
    /// Deletes the retired links: from a detached child when it can, otherwise at once.
    fn reap_retired(&mut self) -> io::Result<()>;
    /// Marks in the host an address that no pod has any more as `unreachable`, so that a client
    /// still sending to it (a proxy or an ingress whose rules lag behind) fails at once and
    /// tries elsewhere, instead of waiting seconds for ARP or a connect timeout.
    fn mark_unreachable(&mut self, ip: IpAddr) -> io::Result<()>;
    /// Removes that mark; Ok(false) when there was none.
    fn clear_unreachable(&mut self, ip: IpAddr) -> io::Result<bool>;
    /// Turns on forwarding in the host for the families asked for.
    fn ensure_forwarding(&mut self, v4: bool, v6: bool) -> io::Result<()>;
}
