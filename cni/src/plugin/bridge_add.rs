//! ADD for the bridge plugin: address, bridge, veth pair, container side, masquerade. Whatever
//! is created is undone if a later step fails.

use std::net::IpAddr;

use crate::error::{code, CniError, Result};
use crate::kernel::{Kernel, LinkDetails, RouteDetails, Rtnl, Side, Veth};
use crate::masq::{self, Firewall, Iptables};
use crate::names;
use crate::result::{CniResult, Interface, Route};
use keelson_netlink::{ignore_exists, is_exists};

use super::ipam_backend::IpamBackend;
use super::{nl_err, routes, Node, Request};

pub fn add(req: &Request) -> Result<CniResult> {
    req.conf.validate_bridge()?;
    let ipam = IpamBackend::from_conf(req.conf)?;
    let mut kernel = Rtnl::in_container(&req.env.netns)?;
    let node = Node {
        kernel: &mut kernel,
        fw: &Iptables,
    };
    add_with(node, &ipam, req)
}

/// ADD on any node (the real one, or fakes in tests).
pub fn add_with(node: Node, ipam: &IpamBackend, req: &Request) -> Result<CniResult> {
    let mut attempt = Attempt {
        kernel: node.kernel,
        fw: node.fw,
        ipam,
        req,
        made: Made::default(),
    };
    tracing::debug!("ADD: namespaces open");
    let mut ipres = attempt.allocate()?;
    tracing::debug!("ADD: addresses allocated");
    let bridge = attempt.bridge(&ipres)?;
    tracing::debug!("ADD: bridge ready");
    let host_end = attempt.veth(&bridge)?;
    tracing::debug!("ADD: veth created");
    let (container_end, routes) = attempt.container_side(&mut ipres)?;
    tracing::debug!("ADD: container addresses and routes set");
    attempt.forwarding(&ipres)?;
    tracing::debug!("ADD: forwarding on");
    attempt.masquerade(&ipres)?;
    // Complete: keep everything.
    attempt.made = Made::default();
    Ok(report(
        req,
        [bridge, host_end, container_end],
        ipres,
        routes,
    ))
}

/// What an ADD under way has made; `Attempt` undoes it when dropped before the ADD completed.
#[derive(Default)]
struct Made {
    addresses: bool,
    veth: Option<String>,
    masq: bool,
}

struct Attempt<'a> {
    kernel: &'a mut dyn Kernel,
    fw: &'a dyn Firewall,
    ipam: &'a IpamBackend,
    req: &'a Request<'a>,
    made: Made,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        let Request { env, conf, stdin } = *self.req;
        if self.made.masq {
            super::bridge_del::remove_masq(conf, env, self.fw);
        }
        if let Some(veth) = &self.made.veth {
            let _ = self.kernel.delete_link(Side::Host, veth);
        }
        if self.made.addresses {
            if let Err(e) = self.ipam.del(env, stdin, &[]) {
                tracing::warn!(error = %e, "rollback could not release addresses");
            }
        }
    }
}

impl Attempt<'_> {
    fn allocate(&mut self) -> Result<CniResult> {
        let ipres = self.ipam.add(self.req.env, self.req.stdin)?;
        self.made.addresses = true;
        if ipres.ips.is_empty() {
            return Err(CniError::config("IPAM returned no addresses"));
        }
        // A pod that had one of these addresses before left it marked unreachable (see DEL).
        for ip in &ipres.ips {
            let ip = ip.address.ip();
            self.kernel.clear_unreachable(ip).map_err(nl_err(format!(
                "cannot remove the unreachable route of {ip}"
            )))?;
        }
        Ok(ipres)
    }

    fn bridge(&mut self, ipres: &CniResult) -> Result<LinkDetails> {
        let gateways: Vec<(IpAddr, u8)> = ipres
            .ips
            .iter()
            .filter_map(|ip| ip.gateway.map(|g| (g, ip.address.prefix())))
            .collect();
        ensure_bridge(self.kernel, self.req.conf, &gateways)
    }

    /// Creates the pair (the peer under its final name in the container), returns the host end.
    fn veth(&mut self, bridge: &LinkDetails) -> Result<LinkDetails> {
        let Request { env, conf, .. } = *self.req;
        let name = names::host_veth(&env.container_id, &env.ifname);
        // An ADD killed earlier for the same attachment may have left its pair behind.
        self.kernel
            .delete_link(Side::Host, &name)
            .map_err(nl_err(format!("cannot remove stale {name}")))?;
        self.made.veth = Some(name.clone());
        let veth = Veth {
            host_name: &name,
            bridge: bridge.index,
            mtu: conf.mtu,
            peer_name: &env.ifname,
        };
        self.kernel.create_veth(&veth).map_err(|e| {
            if is_exists(&e) {
                CniError::new(
                    code::NETLINK,
                    format!("interface {} already exists in {}", env.ifname, env.netns),
                    "pick another CNI_IFNAME or delete the existing attachment first",
                )
            } else {
                CniError::netlink(format!("cannot create veth pair {name}/{}", env.ifname), &e)
            }
        })?;
        let host_end = self
            .kernel
            .link(Side::Host, &name)
            .map_err(nl_err(format!("cannot read {name}")))?
            .ok_or_else(|| vanished(format!("{name} vanished after creation")))?;
        if conf.hairpin_mode {
            self.kernel
                .set_hairpin(host_end.index)
                .map_err(nl_err(format!("cannot set hairpin mode on {name}")))?;
        }
        Ok(host_end)
    }

    /// Brings the container's end up with its addresses and routes; returns it and the routes
    /// for the result.
    fn container_side(&mut self, ipres: &mut CniResult) -> Result<(LinkDetails, Vec<Route>)> {
        let Request { env, conf, .. } = *self.req;
        let (ifname, netns) = (&env.ifname, &env.netns);
        let end = self
            .kernel
            .link(Side::Container, ifname)
            .map_err(nl_err(format!("cannot read {ifname} in {netns}")))?
            .ok_or_else(|| vanished(format!("{ifname} missing in {netns} after creation")))?;
        self.kernel
            .set_up(Side::Container, end.index, false)
            .map_err(nl_err(format!("cannot bring {ifname} up in {netns}")))?;
        for ip in &mut ipres.ips {
            // The container's interface is the third in the result.
            ip.interface = Some(2);
            ignore_exists(
                self.kernel
                    .add_address(Side::Container, end.index, ip.address),
            )
            .map_err(nl_err(format!("cannot add {} to {ifname}", ip.address)))?;
        }
        let routes = routes::result_routes(&ipres.routes, &ipres.ips, conf.is_default_gateway);
        for (dst, gw) in routes::kernel_routes(&routes, &ipres.ips) {
            let route = RouteDetails {
                dst,
                gw,
                oif: Some(end.index),
            };
            ignore_exists(self.kernel.add_route(Side::Container, &route))
                .map_err(nl_err(format!("cannot add route {dst} in {netns}")))?;
        }
        Ok((end, routes))
    }

    fn forwarding(&mut self, ipres: &CniResult) -> Result<()> {
        if !self.req.conf.gateway_on_bridge() {
            return Ok(());
        }
        let v4 = ipres.ips.iter().any(|ip| ip.address.is_ipv4());
        let v6 = ipres.ips.iter().any(|ip| ip.address.is_ipv6());
        self.kernel
            .ensure_forwarding(v4, v6)
            .map_err(|e| CniError::io("cannot enable forwarding", &e))
    }

    fn masquerade(&mut self, ipres: &CniResult) -> Result<()> {
        if !self.req.conf.ip_masq {
            return Ok(());
        }
        self.made.masq = true;
        install_masq(self.req, ipres, self.fw)
    }
}

fn vanished(msg: String) -> CniError {
    CniError::new(code::NETLINK, msg, "")
}

/// The result: the bridge, the host end and the container's end, in that order.
fn report(
    req: &Request,
    ends: [LinkDetails; 3],
    ipres: CniResult,
    routes: Vec<Route>,
) -> CniResult {
    let [bridge, host_end, container_end] = ends;
    let iface = |l: LinkDetails, sandbox: &str| Interface {
        name: l.name,
        mac: l.mac,
        sandbox: sandbox.to_string(),
        ..Default::default()
    };
    CniResult {
        cni_version: req.conf.cni_version.clone(),
        interfaces: vec![
            iface(bridge, ""),
            iface(host_end, ""),
            iface(container_end, &req.env.netns),
        ],
        ips: ipres.ips,
        routes,
        dns: ipres.dns,
    }
}

/// Creates the bridge when missing (up, with the MTU), brings it up, and puts the gateway
/// addresses on it when it is the gateway.
fn ensure_bridge(
    kernel: &mut dyn Kernel,
    conf: &crate::config::NetConf,
    gateways: &[(IpAddr, u8)],
) -> Result<LinkDetails> {
    let name = conf.bridge_name();
    let read_err = || nl_err(format!("cannot read bridge {name}"));
    let mut existing = kernel.link(Side::Host, name).map_err(read_err())?;
    if existing.is_none() {
        // EEXIST: a parallel ADD created it first.
        ignore_exists(kernel.create_bridge(name, conf.mtu, conf.promisc_mode))
            .map_err(nl_err(format!("cannot create bridge {name}")))?;
        existing = kernel.link(Side::Host, name).map_err(read_err())?;
    }
    let bridge =
        existing.ok_or_else(|| vanished(format!("bridge {name} vanished after creation")))?;
    if bridge.kind.as_deref() != Some("bridge") {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!("{name} exists and is not a bridge (kind {:?})", bridge.kind),
            "choose another \"bridge\" name or remove that link",
        ));
    }
    if !bridge.up || conf.promisc_mode {
        kernel
            .set_up(Side::Host, bridge.index, conf.promisc_mode)
            .map_err(nl_err(format!("cannot bring {name} up")))?;
    }
    if conf.gateway_on_bridge() {
        for (gw, prefix) in gateways {
            let net = ipnetwork::IpNetwork::new(*gw, *prefix)
                .map_err(|e| CniError::config(format!("gateway {gw}/{prefix}: {e}")))?;
            ignore_exists(kernel.add_address(Side::Host, bridge.index, net))
                .map_err(nl_err(format!("cannot add {net} to {name}")))?;
        }
    }
    Ok(bridge)
}

pub fn install_masq(req: &Request, res: &CniResult, fw: &dyn Firewall) -> Result<()> {
    let Request { env, conf, .. } = *req;
    let chain = names::masq_chain(&conf.name, &env.container_id, &env.ifname);
    for v6 in [false, true] {
        let addrs: Vec<_> = res
            .ips
            .iter()
            .filter(|ip| ip.address.is_ipv6() == v6)
            .map(|ip| {
                let subnet = ipnetwork::IpNetwork::new(ip.address.network(), ip.address.prefix())
                    .unwrap_or(ip.address);
                (ip.address.ip(), subnet)
            })
            .collect();
        if addrs.is_empty() {
            continue;
        }
        fw.restore_nat(
            v6,
            &masq::render_add(&conf.name, &chain, &addrs, &conf.non_masquerade_cidrs),
        )
        .map_err(|e| {
            CniError::new(
                code::FIREWALL,
                format!("cannot install masquerade chain {chain}"),
                e.to_string(),
            )
        })?;
    }
    Ok(())
}
