//! CHECK for the bridge plugin: the previous result still describes what is there.

use crate::error::{code, CniError, Result};
use crate::kernel::{Kernel, Rtnl, Side};
use crate::masq::{self, Firewall, Iptables};
use crate::names;
use crate::result::CniResult;

use super::ipam_backend::IpamBackend;
use super::{nl_err, routes, Node, Request};

fn failed(msg: String, details: &str) -> CniError {
    CniError::new(code::CHECK_FAILED, msg, details)
}

pub fn check(req: &Request) -> Result<()> {
    let prev =
        req.conf.prev_result.as_ref().ok_or_else(|| {
            CniError::config("CHECK needs prevResult in the network configuration")
        })?;
    let ipam = IpamBackend::from_conf(req.conf)?;
    ipam.check(req.env, req.stdin, &req.conf.prev_ips())?;
    let mut kernel = Rtnl::in_container(&req.env.netns)?;
    let node = Node {
        kernel: &mut kernel,
        fw: &Iptables,
    };
    check_with(node, req, prev)
}

/// The kernel and firewall part of CHECK, on any node (the real one, or fakes in tests).
pub fn check_with(node: Node, req: &Request, prev: &CniResult) -> Result<()> {
    let Node { kernel, fw } = node;
    check_container(kernel, req, prev)?;
    check_host(kernel, req)?;
    if req.conf.ip_masq {
        check_masq(fw, req, prev)?;
    }
    Ok(())
}

/// The interface is up with the MTU, addresses and routes of the result.
fn check_container(kernel: &mut dyn Kernel, req: &Request, prev: &CniResult) -> Result<()> {
    let Request { env, conf, .. } = *req;
    let (ifname, netns) = (&env.ifname, &env.netns);
    let cif = kernel
        .link(Side::Container, ifname)
        .map_err(nl_err(format!("cannot read {ifname}")))?
        .ok_or_else(|| {
            failed(
                format!("interface {ifname} not found in {netns}"),
                "run DEL and ADD again",
            )
        })?;
    if !cif.up {
        return Err(failed(format!("interface {ifname} in {netns} is down"), ""));
    }
    if let Some(mtu) = conf.mtu.filter(|m| *m != cif.mtu) {
        return Err(failed(
            format!("interface {ifname} has MTU {}, config says {mtu}", cif.mtu),
            "",
        ));
    }
    let have = kernel
        .addresses(Side::Container)
        .map_err(nl_err("cannot list addresses".into()))?;
    for ip in &prev.ips {
        if !have.contains(&(cif.index, ip.address)) {
            return Err(failed(
                format!("address {} missing on {ifname} in {netns}", ip.address),
                "the address was removed or changed after ADD",
            ));
        }
    }
    let have_routes = kernel
        .routes(Side::Container)
        .map_err(nl_err("cannot list routes".into()))?;
    for (dst, gw) in routes::kernel_routes(&prev.routes, &prev.ips) {
        if !have_routes.iter().any(|r| r.dst == dst && r.gw == gw) {
            let via = gw.map(|g| format!(" via {g}")).unwrap_or_default();
            return Err(failed(format!("route {dst}{via} missing in {netns}"), ""));
        }
    }
    Ok(())
}

/// The host end exists and is a port of the bridge.
fn check_host(kernel: &mut dyn Kernel, req: &Request) -> Result<()> {
    let Request { env, conf, .. } = *req;
    let veth = names::host_veth(&env.container_id, &env.ifname);
    let bridge = conf.bridge_name();
    let bridge = kernel
        .link(Side::Host, bridge)
        .map_err(nl_err(format!("cannot read {bridge}")))?
        .ok_or_else(|| failed(format!("bridge {bridge} not found"), ""))?;
    let hv = kernel
        .link(Side::Host, &veth)
        .map_err(nl_err(format!("cannot read {veth}")))?
        .ok_or_else(|| failed(format!("host interface {veth} not found"), ""))?;
    if hv.master != Some(bridge.index) {
        return Err(failed(
            format!("{veth} is not attached to bridge {}", bridge.name),
            "",
        ));
    }
    Ok(())
}

fn check_masq(fw: &dyn Firewall, req: &Request, prev: &CniResult) -> Result<()> {
    let Request { env, conf, .. } = *req;
    let chain = names::masq_chain(&conf.name, &env.container_id, &env.ifname);
    let save = fw
        .save_nat(false)
        .map_err(|e| CniError::new(code::FIREWALL, "cannot read nat rules", e.to_string()))?;
    if prev.ips.iter().any(|ip| ip.address.is_ipv4())
        && !masq::chains_of(&save, &conf.name).contains(&chain)
    {
        return Err(failed(format!("masquerade chain {chain} missing"), ""));
    }
    Ok(())
}
