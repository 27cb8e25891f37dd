//! CHECK for the bridge plugin: the previous result still describes what is there.

use crate::config::NetConf;
use crate::env::CniEnv;
use crate::error::{code, CniError, Result};
use crate::netlink::{addr, link, route, Netlink};
use crate::netns::NetNs;
use crate::{masq, names};

use super::bridge_add::open_netns;
use super::ipam_backend::IpamBackend;
use super::routes;

fn failed(msg: String, details: &str) -> CniError {
    CniError::new(code::CHECK_FAILED, msg, details)
}

pub fn check(env: &CniEnv, conf: &NetConf, stdin: &[u8]) -> Result<()> {
    let prev = conf
        .prev_result
        .as_ref()
        .ok_or_else(|| CniError::config("CHECK needs prevResult in the network configuration"))?;
    let ipam = IpamBackend::from_conf(conf)?;
    let ips: Vec<_> = prev.ips.iter().map(|ip| ip.address.ip()).collect();
    ipam.check(env, stdin, &ips)?;

    let home =
        NetNs::current().map_err(|e| CniError::io("cannot open own network namespace", &e))?;
    let netns = open_netns(&env.netns)?;
    let mut cnl = netns
        .netlink(&home)
        .map_err(|e| CniError::netlink(format!("cannot open netlink in {}", env.netns), &e))?;
    let nl = |what: String| move |e: std::io::Error| CniError::netlink(what, &e);
    let cif = link::get(&mut cnl, &env.ifname)
        .map_err(nl(format!("cannot read {}", env.ifname)))?
        .ok_or_else(|| {
            failed(
                format!("interface {} not found in {}", env.ifname, env.netns),
                "run DEL and ADD again",
            )
        })?;
    if !cif.up {
        return Err(failed(
            format!("interface {} in {} is down", env.ifname, env.netns),
            "",
        ));
    }
    if let Some(mtu) = conf.mtu {
        if cif.mtu != mtu {
            return Err(failed(
                format!(
                    "interface {} has MTU {}, config says {mtu}",
                    env.ifname, cif.mtu
                ),
                "",
            ));
        }
    }
    let have = addr::list(&mut cnl).map_err(nl("cannot list addresses".into()))?;
    for ip in &prev.ips {
        if !have
            .iter()
            .any(|(idx, a)| *idx == cif.index && *a == ip.address)
        {
            return Err(failed(
                format!(
                    "address {} missing on {} in {}",
                    ip.address, env.ifname, env.netns
                ),
                "the address was removed or changed after ADD",
            ));
        }
    }
    let have_routes = route::list(&mut cnl).map_err(nl("cannot list routes".into()))?;
    for (dst, gw) in routes::kernel_routes(&prev.routes, &prev.ips) {
        if !have_routes.iter().any(|r| r.dst == dst && r.gw == gw) {
            let via = gw.map(|g| format!(" via {g}")).unwrap_or_default();
            return Err(failed(
                format!("route {dst}{via} missing in {}", env.netns),
                "",
            ));
        }
    }

    let mut host = Netlink::open().map_err(nl("cannot open netlink".into()))?;
    let veth = names::host_veth(&env.container_id, &env.ifname);
    let bridge = link::get(&mut host, conf.bridge_name())
        .map_err(nl(format!("cannot read {}", conf.bridge_name())))?
        .ok_or_else(|| failed(format!("bridge {} not found", conf.bridge_name()), ""))?;
    let hv = link::get(&mut host, &veth)
        .map_err(nl(format!("cannot read {veth}")))?
        .ok_or_else(|| failed(format!("host interface {veth} not found"), ""))?;
    if hv.master != Some(bridge.index) {
        return Err(failed(
            format!("{veth} is not attached to bridge {}", bridge.name),
            "",
        ));
    }
    if conf.ip_masq {
        let chain = names::masq_chain(&conf.name, &env.container_id, &env.ifname);
        let save = masq::Firewall::save_nat(&masq::Iptables, false)
            .map_err(|e| CniError::new(code::FIREWALL, "cannot read nat rules", e.to_string()))?;
        if prev.ips.iter().any(|ip| ip.address.is_ipv4())
            && !masq::chains_of(&save, &conf.name).contains(&chain)
        {
            return Err(failed(format!("masquerade chain {chain} missing"), ""));
        }
    }
    Ok(())
}
