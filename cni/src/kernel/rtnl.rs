//! The real `Kernel`: rtnetlink sockets in the host's and the container's namespaces, each
//! opened on first use, and the forwarding switches under /proc/sys.

use std::io;

use ipnetwork::IpNetwork;
use std::net::IpAddr;

use super::{Kernel, LinkDetails, RouteDetails, Side, Veth};
use crate::error::{code, CniError, Result};
use crate::netns::NetNs;
use crate::{reaper, sysctl};
use keelson_netlink::{addr, link, route, Netlink};

pub struct Rtnl {
    host: Option<Netlink>,
    container: Option<Container>,
}

/// The container's namespace; its socket is opened from inside it when first needed.
struct Container {
    path: String,
    ns: NetNs,
    netlink: Option<Netlink>,
}

impl Rtnl {
    /// The host's namespace only (GC).
    pub fn host_only() -> Rtnl {
        Rtnl {
            host: None,
            container: None,
        }
    }

    /// With the container's namespace at `path`, which must exist (ADD, CHECK).
    pub fn in_container(path: &str) -> Result<Rtnl> {
        let ns = NetNs::open(path).map_err(|e| {
            CniError::new(
                code::UNKNOWN_CONTAINER,
                format!("cannot open network namespace {path:?}"),
                e.to_string(),
            )
        })?;
        Ok(Rtnl::with(path, Some(ns)))
    }

    /// With the container's namespace at `path` when it still exists (DEL).
    pub fn if_container(path: &str) -> Rtnl {
        let ns = if path.is_empty() {
            None
        } else {
            NetNs::open(path).ok()
        };
        Rtnl::with(path, ns)
    }

    fn with(path: &str, ns: Option<NetNs>) -> Rtnl {
        Rtnl {
            host: None,
            container: ns.map(|ns| Container {
                path: path.to_string(),
                ns,
                netlink: None,
            }),
        }
    }

    fn nl(&mut self, side: Side) -> io::Result<&mut Netlink> {
        match side {
            Side::Host => match &mut self.host {
                Some(nl) => Ok(nl),
                none => Ok(none.insert(Netlink::open().map_err(context("cannot open netlink"))?)),
            },
            Side::Container => {
                let c = self.container.as_mut().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "no container network namespace")
                })?;
                match &mut c.netlink {
                    Some(nl) => Ok(nl),
                    none => {
                        let home = NetNs::current()
                            .map_err(context("cannot open own network namespace"))?;
                        let what = format!("cannot open netlink in {}", c.path);
                        Ok(none.insert(c.ns.netlink(&home).map_err(context(&what))?))
                    }
                }
            }
        }
    }
}

/// Keeps the error's kind and says which socket could not be opened.
fn context(what: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Kernel for Rtnl {
    fn has_container(&self) -> bool {
        self.container.is_some()
    }

    fn link(&mut self, side: Side, name: &str) -> io::Result<Option<LinkDetails>> {
        link::get(self.nl(side)?, name)
    }

    fn links(&mut self, side: Side) -> io::Result<Vec<LinkDetails>> {
        link::list(self.nl(side)?)
    }

    fn addresses(&mut self, side: Side) -> io::Result<Vec<(u32, IpNetwork)>> {
        addr::list(self.nl(side)?)
    }

    fn routes(&mut self, side: Side) -> io::Result<Vec<RouteDetails>> {
        route::list(self.nl(side)?)
    }

    fn create_bridge(&mut self, name: &str, mtu: Option<u32>, promisc: bool) -> io::Result<()> {
        link::create_bridge(self.nl(Side::Host)?, name, mtu, promisc)
    }

    fn create_veth(&mut self, veth: &Veth) -> io::Result<()> {
        let peer_netns = match &self.container {
            Some(c) => c.ns.raw_fd(),
            None => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
        };
        let spec = link::VethSpec {
            host_name: veth.host_name,
            master: veth.bridge,
            mtu: veth.mtu,
            peer_name: veth.peer_name,
            peer_netns,
        };
        link::create_veth(self.nl(Side::Host)?, &spec)
    }

    fn set_up(&mut self, side: Side, index: u32, promisc: bool) -> io::Result<()> {
        link::set_up(self.nl(side)?, index, promisc)
    }

    fn set_down(&mut self, side: Side, index: u32) -> io::Result<()> {
        link::set_down(self.nl(side)?, index)
    }

    fn set_hairpin(&mut self, index: u32) -> io::Result<()> {
        link::set_hairpin(self.nl(Side::Host)?, index)
    }

    fn add_address(&mut self, side: Side, index: u32, net: IpNetwork) -> io::Result<()> {
        addr::add(self.nl(side)?, index, net)
    }

    fn add_route(&mut self, side: Side, r: &RouteDetails) -> io::Result<()> {
        route::add(self.nl(side)?, r)
    }

    fn mark_unreachable(&mut self, ip: IpAddr) -> io::Result<()> {
        route::replace_unreachable(self.nl(Side::Host)?, ip)
    }

    fn clear_unreachable(&mut self, ip: IpAddr) -> io::Result<bool> {
        route::delete_unreachable(self.nl(Side::Host)?, ip)
    }

    fn delete_link(&mut self, side: Side, name: &str) -> io::Result<bool> {
        link::delete(self.nl(side)?, name)
    }

    fn delete_link_index(&mut self, side: Side, index: u32) -> io::Result<bool> {
        link::delete_index(self.nl(side)?, index)
    }

    fn retire(&mut self, index: u32) -> io::Result<()> {
        link::retire(self.nl(Side::Host)?, index, reaper::RETIRED_GROUP)
    }

    fn reap_retired(&mut self) -> io::Result<()> {
        if reaper::reap_later().is_err() {
            return reaper::reap_now();
        }
        Ok(())
    }

    fn ensure_forwarding(&mut self, v4: bool, v6: bool) -> io::Result<()> {
        sysctl::ensure_forwarding(v4, v6)
    }
}
