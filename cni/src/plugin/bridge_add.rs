//! ADD for the bridge plugin: address, bridge, veth pair, container side, masquerade. Whatever
//! is created is undone if a later step fails.

use std::net::IpAddr;

use crate::config::NetConf;
use crate::env::CniEnv;
use crate::error::{code, CniError, Result};
use crate::masq::{self, Firewall, Iptables};
use crate::netlink::{addr, is_exists, link, route, Netlink};
use crate::netns::NetNs;
use crate::result::{CniResult, Interface};
use crate::{names, sysctl};

use super::ipam_backend::IpamBackend;
use super::routes;

fn nl_err(what: String) -> impl FnOnce(std::io::Error) -> CniError {
    move |e| CniError::netlink(what, &e)
}

pub fn open_netns(path: &str) -> Result<NetNs> {
    NetNs::open(path).map_err(|e| {
        CniError::new(
            code::UNKNOWN_CONTAINER,
            format!("cannot open network namespace {path:?}"),
            e.to_string(),
        )
    })
}

/// What ADD has done so far, undone on drop unless the ADD completed.
struct Undo<'a> {
    env: &'a CniEnv,
    conf: &'a NetConf,
    stdin: &'a [u8],
    ipam: Option<&'a IpamBackend>,
    veth: Option<String>,
    masq: bool,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if self.masq {
            super::bridge_del::remove_masq(self.conf, self.env, &Iptables);
        }
        if let Some(veth) = &self.veth {
            if let Ok(mut nl) = Netlink::open() {
                let _ = link::delete(&mut nl, veth);
            }
        }
        if let Some(ipam) = self.ipam {
            if let Err(e) = ipam.del(self.env, self.stdin, &[]) {
                tracing::warn!(error = %e, "rollback could not release addresses");
            }
        }
    }
}

pub fn add(env: &CniEnv, conf: &NetConf, stdin: &[u8]) -> Result<CniResult> {
    conf.validate_bridge()?;
    let ipam = IpamBackend::from_conf(conf)?;
    let home =
        NetNs::current().map_err(|e| CniError::io("cannot open own network namespace", &e))?;
    let netns = open_netns(&env.netns)?;
    let mut undo = Undo {
        env,
        conf,
        stdin,
        ipam: None,
        veth: None,
        masq: false,
    };

    tracing::debug!("ADD: namespaces open");
    let mut ipres = ipam.add(env, stdin)?;
    tracing::debug!("ADD: addresses allocated");
    undo.ipam = Some(&ipam);
    if ipres.ips.is_empty() {
        return Err(CniError::config("IPAM returned no addresses"));
    }

    let mut host = Netlink::open().map_err(|e| CniError::netlink("cannot open netlink", &e))?;
    let gateways: Vec<(IpAddr, u8)> = ipres
        .ips
        .iter()
        .filter_map(|ip| ip.gateway.map(|g| (g, ip.address.prefix())))
        .collect();
    let bridge = ensure_bridge(&mut host, conf, &gateways)?;
    tracing::debug!("ADD: bridge ready");

    let veth_name = names::host_veth(&env.container_id, &env.ifname);
    // An ADD killed earlier for the same attachment may have left its pair behind.
    link::delete(&mut host, &veth_name)
        .map_err(nl_err(format!("cannot remove stale {veth_name}")))?;
    undo.veth = Some(veth_name.clone());
    let spec = link::VethSpec {
        host_name: &veth_name,
        master: bridge.index,
        mtu: conf.mtu,
        peer_name: &env.ifname,
        peer_netns: netns.raw_fd(),
    };
    link::create_veth(&mut host, &spec).map_err(|e| {
        if is_exists(&e) {
            CniError::new(
                code::NETLINK,
                format!("interface {} already exists in {}", env.ifname, env.netns),
                "pick another CNI_IFNAME or delete the existing attachment first",
            )
        } else {
            CniError::netlink(
                format!("cannot create veth pair {veth_name}/{}", env.ifname),
                &e,
            )
        }
    })?;
    tracing::debug!("ADD: veth created");
    let host_veth = link::get(&mut host, &veth_name)
        .map_err(nl_err(format!("cannot read {veth_name}")))?
        .ok_or_else(|| {
            CniError::new(
                code::NETLINK,
                format!("{veth_name} vanished after creation"),
                "",
            )
        })?;
    if conf.hairpin_mode {
        link::set_hairpin(&mut host, host_veth.index)
            .map_err(nl_err(format!("cannot set hairpin mode on {veth_name}")))?;
    }

    let mut cnl = netns
        .netlink(&home)
        .map_err(nl_err(format!("cannot open netlink in {}", env.netns)))?;
    let cif = link::get(&mut cnl, &env.ifname)
        .map_err(nl_err(format!(
            "cannot read {} in {}",
            env.ifname, env.netns
        )))?
        .ok_or_else(|| {
            CniError::new(
                code::NETLINK,
                format!("{} missing in {} after creation", env.ifname, env.netns),
                "",
            )
        })?;

    link::set_up(&mut cnl, cif.index, false).map_err(nl_err(format!(
        "cannot bring {} up in {}",
        env.ifname, env.netns
    )))?;
    for ip in &mut ipres.ips {
        ip.interface = Some(2);
        addr::add(&mut cnl, cif.index, ip.address)
            .or_else(|e| if is_exists(&e) { Ok(()) } else { Err(e) })
            .map_err(nl_err(format!(
                "cannot add {} to {}",
                ip.address, env.ifname
            )))?;
    }
    tracing::debug!("ADD: container addresses set");
    let result_routes = routes::result_routes(&ipres.routes, &ipres.ips, conf.is_default_gateway);
    for (dst, gw) in routes::kernel_routes(&result_routes, &ipres.ips) {
        route::add(&mut cnl, dst, gw, cif.index)
            .or_else(|e| if is_exists(&e) { Ok(()) } else { Err(e) })
            .map_err(nl_err(format!("cannot add route {dst} in {}", env.netns)))?;
    }

    tracing::debug!("ADD: routes set");
    if conf.gateway_on_bridge() {
        let v4 = ipres.ips.iter().any(|ip| ip.address.is_ipv4());
        let v6 = ipres.ips.iter().any(|ip| ip.address.is_ipv6());
        sysctl::ensure_forwarding(v4, v6)
            .map_err(|e| CniError::io("cannot enable forwarding", &e))?;
    }
    tracing::debug!("ADD: forwarding on");
    if conf.ip_masq {
        undo.masq = true;
        install_masq(conf, env, &ipres, &Iptables)?;
    }

    let result = CniResult {
        cni_version: conf.cni_version.clone(),
        interfaces: vec![
            Interface {
                name: bridge.name.clone(),
                mac: bridge.mac.clone(),
                ..Default::default()
            },
            Interface {
                name: veth_name,
                mac: host_veth.mac,
                ..Default::default()
            },
            Interface {
                name: env.ifname.clone(),
                mac: cif.mac,
                sandbox: env.netns.clone(),
                ..Default::default()
            },
        ],
        ips: ipres.ips,
        routes: result_routes,
        dns: ipres.dns,
    };
    // Complete: keep everything.
    undo.ipam = None;
    undo.veth = None;
    undo.masq = false;
    Ok(result)
}

/// Creates the bridge when missing (up, with the MTU), brings it up, and puts the gateway
/// addresses on it when it is the gateway.
fn ensure_bridge(
    nl: &mut Netlink,
    conf: &NetConf,
    gateways: &[(IpAddr, u8)],
) -> Result<link::LinkDetails> {
    let name = conf.bridge_name();
    let mut existing = link::get(nl, name).map_err(nl_err(format!("cannot read bridge {name}")))?;
    if existing.is_none() {
        match link::create_bridge(nl, name, conf.mtu, conf.promisc_mode) {
            Ok(()) => {}
            // A parallel ADD created it first.
            Err(e) if is_exists(&e) => {}
            Err(e) => {
                return Err(CniError::netlink(
                    format!("cannot create bridge {name}"),
                    &e,
                ))
            }
        }
        existing = link::get(nl, name).map_err(nl_err(format!("cannot read bridge {name}")))?;
    }
    let bridge = existing.ok_or_else(|| {
        CniError::new(
            code::NETLINK,
            format!("bridge {name} vanished after creation"),
            "",
        )
    })?;
    if bridge.kind.as_deref() != Some("bridge") {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!("{name} exists and is not a bridge (kind {:?})", bridge.kind),
            "choose another \"bridge\" name or remove that link",
        ));
    }
    if !bridge.up || conf.promisc_mode {
        link::set_up(nl, bridge.index, conf.promisc_mode)
            .map_err(nl_err(format!("cannot bring {name} up")))?;
    }
    if conf.gateway_on_bridge() {
        for (gw, prefix) in gateways {
            let net = ipnetwork::IpNetwork::new(*gw, *prefix)
                .map_err(|e| CniError::config(format!("gateway {gw}/{prefix}: {e}")))?;
            match addr::add(nl, bridge.index, net) {
                Ok(()) => {}
                Err(e) if is_exists(&e) => {}
                Err(e) => return Err(CniError::netlink(format!("cannot add {net} to {name}"), &e)),
            }
        }
    }
    Ok(bridge)
}

pub fn install_masq(
    conf: &NetConf,
    env: &CniEnv,
    res: &CniResult,
    fw: &dyn Firewall,
) -> Result<()> {
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
        fw.restore_nat(v6, &masq::render_add(&conf.name, &chain, &addrs))
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
