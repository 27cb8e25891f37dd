//! An in-memory `Kernel` for unit tests: two namespaces of links, addresses and routes that
//! answer like the kernel (EEXIST, ENODEV, veth ends deleted together), a journal of every
//! change, and a failure injected into the first change whose journal entry starts with a prefix.

use ipnetwork::IpNetwork;
use std::io;
use std::net::IpAddr;

use super::{Kernel, LinkDetails, RouteDetails, Side, Veth};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeLink {
    pub details: LinkDetails,
    pub addresses: Vec<IpNetwork>,
    pub hairpin: bool,
    pub retired: bool,
    /// The other end of a veth pair: its side and index.
    pub peer: Option<(Side, u32)>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FakeNs {
    pub links: Vec<FakeLink>,
    pub routes: Vec<RouteDetails>,
}

impl FakeNs {
    pub fn names(&self) -> Vec<&str> {
        self.links.iter().map(|l| l.details.name.as_str()).collect()
    }

    pub fn get(&self, name: &str) -> Option<&FakeLink> {
        self.links.iter().find(|l| l.details.name == name)
    }

    fn by_index(&mut self, index: u32) -> io::Result<&mut FakeLink> {
        self.links
            .iter_mut()
            .find(|l| l.details.index == index)
            .ok_or_else(|| errno(libc::ENODEV))
    }
}

pub struct FakeKernel {
    pub host: FakeNs,
    /// None: the container's namespace is gone.
    pub container: Option<FakeNs>,
    pub journal: Vec<String>,
    pub forwarding: (bool, bool),
    /// Addresses marked unreachable in the host.
    pub unreachable: Vec<IpAddr>,
    fail: Option<(String, i32)>,
    next_index: u32,
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl Default for FakeKernel {
    fn default() -> Self {
        FakeKernel::new()
    }
}

impl FakeKernel {
    /// A host with only `lo` and a container namespace with only `lo`.
    pub fn new() -> FakeKernel {
        let mut k = FakeKernel {
            host: FakeNs::default(),
            container: Some(FakeNs::default()),
            journal: Vec::new(),
            forwarding: (false, false),
            unreachable: Vec::new(),
            fail: None,
            next_index: 1,
        };
        for side in [Side::Host, Side::Container] {
            let lo = k.new_link("lo", "loopback", true);
            k.ns(side).expect("both exist").links.push(lo);
        }
        k
    }

    /// The first change whose journal entry starts with `prefix` fails with `code`.
    pub fn fail_on(&mut self, prefix: &str, code: i32) {
        self.fail = Some((prefix.to_string(), code));
    }

    /// Adds a link that was there before the plugin ran; returns its index.
    pub fn existing(&mut self, side: Side, name: &str, kind: &str) -> u32 {
        let link = self.new_link(name, kind, true);
        let index = link.details.index;
        self.ns(side).expect("namespace exists").links.push(link);
        index
    }

    pub fn ns(&mut self, side: Side) -> io::Result<&mut FakeNs> {
        match side {
            Side::Host => Ok(&mut self.host),
            Side::Container => self.container.as_mut().ok_or_else(|| errno(libc::ENOENT)),
        }
    }

    fn new_link(&mut self, name: &str, kind: &str, up: bool) -> FakeLink {
        let index = self.next_index;
        self.next_index += 1;
        FakeLink {
            details: LinkDetails {
                index,
                name: name.to_string(),
                mac: format!("02:00:00:00:00:{index:02x}"),
                mtu: 1500,
                up,
                master: None,
                kind: Some(kind.to_string()),
            },
            addresses: Vec::new(),
            hairpin: false,
            retired: false,
            peer: None,
        }
    }

    /// Journals a change; fails it when it is the one asked for.
    fn change(&mut self, entry: String) -> io::Result<()> {
        let fails = self
            .fail
            .as_ref()
            .is_some_and(|(prefix, _)| entry.starts_with(prefix.as_str()));
        self.journal.push(entry);
        match self.fail.take_if(|_| fails) {
            Some((_, code)) => Err(errno(code)),
            None => Ok(()),
        }
    }

    /// Removes a link, its routes, and the other end of its veth pair.
    fn remove(&mut self, side: Side, index: u32) -> io::Result<()> {
        let ns = self.ns(side)?;
        let at = ns.links.iter().position(|l| l.details.index == index);
        let link = ns.links.remove(at.ok_or_else(|| errno(libc::ENODEV))?);
        ns.routes.retain(|r| r.oif != Some(index));
        if let Some((peer_side, peer)) = link.peer {
            if self
                .ns(peer_side)
                .is_ok_and(|ns| ns.links.iter().any(|l| l.details.index == peer))
            {
                self.remove(peer_side, peer)?;
            }
        }
        Ok(())
    }
}

impl Kernel for FakeKernel {
    fn has_container(&self) -> bool {
        self.container.is_some()
    }

    fn link(&mut self, side: Side, name: &str) -> io::Result<Option<LinkDetails>> {
        Ok(self.ns(side)?.get(name).map(|l| l.details.clone()))
    }

    fn links(&mut self, side: Side) -> io::Result<Vec<LinkDetails>> {
        Ok(self
            .ns(side)?
            .links
            .iter()
            .map(|l| l.details.clone())
            .collect())
    }

    fn addresses(&mut self, side: Side) -> io::Result<Vec<(u32, IpNetwork)>> {
        let ns = self.ns(side)?;
        Ok(ns
            .links
            .iter()
            .flat_map(|l| l.addresses.iter().map(|a| (l.details.index, *a)))
            .collect())
    }

    fn routes(&mut self, side: Side) -> io::Result<Vec<RouteDetails>> {
        Ok(self.ns(side)?.routes.clone())
    }

    fn create_bridge(&mut self, name: &str, mtu: Option<u32>, promisc: bool) -> io::Result<()> {
        self.change(format!(
            "create_bridge {name} mtu={mtu:?} promisc={promisc}"
        ))?;
        if self.host.get(name).is_some() {
            return Err(errno(libc::EEXIST));
        }
        let mut bridge = self.new_link(name, "bridge", true);
        bridge.details.mtu = mtu.unwrap_or(1500);
        self.host.links.push(bridge);
        Ok(())
    }

    fn create_veth(&mut self, v: &Veth) -> io::Result<()> {
        self.change(format!("create_veth {} {}", v.host_name, v.peer_name))?;
        let taken_in_container = self.ns(Side::Container)?.get(v.peer_name).is_some();
        if self.host.get(v.host_name).is_some() || taken_in_container {
            return Err(errno(libc::EEXIST));
        }
        self.host.by_index(v.bridge)?;
        let mut host = self.new_link(v.host_name, "veth", true);
        let mut peer = self.new_link(v.peer_name, "veth", false);
        for end in [&mut host, &mut peer] {
            end.details.mtu = v.mtu.unwrap_or(1500);
        }
        host.details.master = Some(v.bridge);
        host.peer = Some((Side::Container, peer.details.index));
        peer.peer = Some((Side::Host, host.details.index));
        self.host.links.push(host);
        self.ns(Side::Container)?.links.push(peer);
        Ok(())
    }

    fn set_up(&mut self, side: Side, index: u32, promisc: bool) -> io::Result<()> {
        self.change(format!("set_up {side:?} {index} promisc={promisc}"))?;
        self.ns(side)?.by_index(index)?.details.up = true;
        Ok(())
    }

    fn set_down(&mut self, side: Side, index: u32) -> io::Result<()> {
        self.change(format!("set_down {side:?} {index}"))?;
        self.ns(side)?.by_index(index)?.details.up = false;
        Ok(())
    }

    fn set_hairpin(&mut self, index: u32) -> io::Result<()> {
        self.change(format!("set_hairpin {index}"))?;
        self.host.by_index(index)?.hairpin = true;
        Ok(())
    }

    fn add_address(&mut self, side: Side, index: u32, net: IpNetwork) -> io::Result<()> {
        self.change(format!("add_address {side:?} {index} {net}"))?;
        let link = self.ns(side)?.by_index(index)?;
        if link.addresses.contains(&net) {
            return Err(errno(libc::EEXIST));
        }
        link.addresses.push(net);
        Ok(())
    }

    fn add_route(&mut self, side: Side, r: &RouteDetails) -> io::Result<()> {
        let RouteDetails { dst, gw, oif } = r;
        self.change(format!("add_route {side:?} {dst} via {gw:?} dev {oif:?}"))?;
        let ns = self.ns(side)?;
        if let Some(oif) = oif {
            ns.by_index(*oif)?;
        }
        if ns.routes.iter().any(|have| have.dst == *dst) {
            return Err(errno(libc::EEXIST));
        }
        ns.routes.push(r.clone());
        Ok(())
    }

    fn mark_unreachable(&mut self, ip: IpAddr) -> io::Result<()> {
        self.change(format!("mark_unreachable {ip}"))?;
        if !self.unreachable.contains(&ip) {
            self.unreachable.push(ip);
        }
        Ok(())
    }

    fn clear_unreachable(&mut self, ip: IpAddr) -> io::Result<bool> {
        self.change(format!("clear_unreachable {ip}"))?;
        let before = self.unreachable.len();
        self.unreachable.retain(|have| *have != ip);
        Ok(self.unreachable.len() != before)
    }

    fn delete_link(&mut self, side: Side, name: &str) -> io::Result<bool> {
        self.change(format!("delete_link {side:?} {name}"))?;
        match self.ns(side)?.get(name).map(|l| l.details.index) {
            Some(index) => self.remove(side, index).map(|()| true),
            None => Ok(false),
        }
    }

    fn delete_link_index(&mut self, side: Side, index: u32) -> io::Result<bool> {
        self.change(format!("delete_link_index {side:?} {index}"))?;
        match self.remove(side, index) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn retire(&mut self, index: u32) -> io::Result<()> {
        self.change(format!("retire {index}"))?;
        let link = self.host.by_index(index)?;
        link.details.up = false;
        link.retired = true;
        Ok(())
    }

    fn reap_retired(&mut self) -> io::Result<()> {
        self.change("reap_retired".into())?;
        let retired: Vec<u32> = self
            .host
            .links
            .iter()
            .filter(|l| l.retired)
            .map(|l| l.details.index)
            .collect();
        for index in retired {
            self.remove(Side::Host, index)?;
        }
        Ok(())
    }

    fn ensure_forwarding(&mut self, v4: bool, v6: bool) -> io::Result<()> {
        self.change(format!("ensure_forwarding v4={v4} v6={v6}"))?;
        self.forwarding.0 |= v4;
        self.forwarding.1 |= v6;
        Ok(())
    }
}
