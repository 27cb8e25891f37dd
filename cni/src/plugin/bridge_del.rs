//! DEL and GC for the bridge plugin. Both succeed when what they would remove is already gone.

use std::collections::HashSet;
use std::net::IpAddr;

use crate::config::NetConf;
use crate::env::CniEnv;
use crate::error::{code, CniError, Result};
use crate::kernel::{Kernel, Rtnl, Side};
use crate::masq::{self, Firewall, Iptables};
use crate::names;
use keelson_netlink::is_not_found;

use super::ipam_backend::IpamBackend;
use super::{nl_err, Node, Request};

pub fn del(req: &Request) -> Result<()> {
    let ipam = IpamBackend::from_conf(req.conf)?;
    let mut kernel = Rtnl::if_container(&req.env.netns);
    let node = Node {
        kernel: &mut kernel,
        fw: &Iptables,
    };
    del_with(node, &ipam, req)
}

/// DEL on any node (the real one, or fakes in tests).
pub fn del_with(node: Node, ipam: &IpamBackend, req: &Request) -> Result<()> {
    let Request { env, conf, stdin } = *req;
    let Node { kernel, fw } = node;
    let hints = conf.prev_ips();
    // Only the addresses still on the container's interface are this attachment's for sure: a
    // repeated DEL may come after its addresses went to another pod.
    let leaving = if conf.gateway_on_bridge() {
        container_addresses(kernel, env)
    } else {
        Vec::new()
    };
    // Marked while the interface still answers: a connection attempt after the link went down
    // and before the mark would be dropped, and the mark does not end it: the client waits for
    // its connect timeout (an ingress request failed so in a rolling update). Marked before
    // the release too, so that no ADD can be handed an address and then see it marked.
    for ip in leaving {
        if let Err(e) = kernel.mark_unreachable(ip) {
            tracing::warn!(%ip, error = %e, "cannot mark the address unreachable");
        }
    }
    // Interface and rules go before the addresses: a DEL killed half-way must not leave a
    // working interface whose address was already handed to someone else.
    remove_interfaces(kernel, env, conf)?;
    if conf.ip_masq {
        remove_masq_rules(conf, env, &hints, fw)?;
    }
    ipam.del(env, stdin, &hints)
}

/// The addresses on the container's interface, when its namespace and interface still exist.
fn container_addresses(kernel: &mut dyn Kernel, env: &CniEnv) -> Vec<IpAddr> {
    if !kernel.has_container() {
        return Vec::new();
    }
    let found = kernel.link(Side::Container, &env.ifname).and_then(|link| {
        let Some(link) = link else {
            return Ok(Vec::new());
        };
        let all = kernel.addresses(Side::Container)?;
        Ok(all
            .into_iter()
            .filter(|(index, _)| *index == link.index)
            .map(|(_, net)| net.ip())
            // The kernel's own fe80:: address is no one else's to reach.
            .filter(|ip| !matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()))
            .collect())
    });
    found.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read the container's addresses");
        Vec::new()
    })
}

fn remove_interfaces(kernel: &mut dyn Kernel, env: &CniEnv, conf: &NetConf) -> Result<()> {
    let veth = names::host_veth(&env.container_id, &env.ifname);
    let host_end = kernel
        .link(Side::Host, &veth)
        .map_err(nl_err(format!("cannot read {veth}")))?;
    match host_end {
        // Deleting one end of the pair removes the other.
        Some(l) if conf.sync_delete => {
            kernel
                .delete_link_index(Side::Host, l.index)
                .map_err(nl_err(format!("cannot delete {veth}")))?;
        }
        Some(l) => {
            // A reaper from an earlier DEL may delete it between our look-up and now.
            match kernel.retire(l.index) {
                Err(e) if !is_not_found(&e) => {
                    return Err(CniError::netlink(format!("cannot retire {veth}"), &e))
                }
                _ => {}
            }
            kernel
                .reap_retired()
                .map_err(nl_err(format!("cannot delete {veth}")))?;
        }
        // Our end is gone already: look at the container's side; a missing namespace means
        // nothing is left there.
        None if kernel.has_container() => {
            kernel
                .delete_link(Side::Container, &env.ifname)
                .map_err(nl_err(format!(
                    "cannot delete {} in {}",
                    env.ifname, env.netns
                )))?;
        }
        None => {}
    }
    Ok(())
}

/// Removes one attachment's masquerade rules: with the previous result's addresses in one
/// iptables-restore call; otherwise (or when the rules are not as ADD left them) by reading
/// iptables-save and removing whatever belongs to the chain.
fn remove_masq_rules(
    conf: &NetConf,
    env: &CniEnv,
    ips: &[IpAddr],
    fw: &dyn Firewall,
) -> Result<()> {
    let chain = names::masq_chain(&conf.name, &env.container_id, &env.ifname);
    let mut fast = !ips.is_empty();
    for v6 in [false, true] {
        let family: Vec<IpAddr> = ips
            .iter()
            .copied()
            .filter(|ip| ip.is_ipv6() == v6)
            .collect();
        if fast && !family.is_empty() {
            fast = fw
                .restore_nat(v6, &masq::render_remove(&conf.name, &chain, &family))
                .is_ok();
        }
    }
    if fast {
        return Ok(());
    }
    teardown_masq(conf, fw, |c| c == chain)
}

/// Best-effort removal of one attachment's masquerade chain (used by ADD's rollback).
pub fn remove_masq(conf: &NetConf, env: &CniEnv, fw: &dyn Firewall) {
    let chain = names::masq_chain(&conf.name, &env.container_id, &env.ifname);
    if let Err(e) = teardown_masq(conf, fw, |c| c == chain) {
        tracing::warn!(error = %e, "rollback could not remove masquerade chain");
    }
}

fn teardown_masq(conf: &NetConf, fw: &dyn Firewall, remove: impl Fn(&str) -> bool) -> Result<()> {
    let fw_err = |e: std::io::Error| {
        CniError::new(
            code::FIREWALL,
            "cannot remove masquerade rules",
            e.to_string(),
        )
    };
    for v6 in [false, true] {
        let save = match fw.save_nat(v6) {
            Ok(s) => s,
            // No ip6tables (or IPv6 disabled): nothing of ours can be there.
            Err(_) if v6 => continue,
            Err(e) => return Err(fw_err(e)),
        };
        if let Some(text) = masq::render_teardown(&save, &conf.name, &remove) {
            fw.restore_nat(v6, &text).map_err(fw_err)?;
        }
    }
    Ok(())
}

pub fn gc(req: &Request) -> Result<()> {
    let ipam = IpamBackend::from_conf(req.conf)?;
    let node = Node {
        kernel: &mut Rtnl::host_only(),
        fw: &Iptables,
    };
    gc_with(node, &ipam, req)
}

/// GC: releases addresses, host veths on our bridge and masquerade chains of every
/// attachment not in cni.dev/valid-attachments.
pub fn gc_with(node: Node, ipam: &IpamBackend, req: &Request) -> Result<()> {
    let Request { env, conf, stdin } = *req;
    let Node { kernel, fw } = node;
    let valid = conf.valid_owners();
    ipam.gc(env, stdin, &valid)?;

    let keep_veths: HashSet<String> = valid
        .iter()
        .map(|o| names::host_veth(&o.id, &o.ifname))
        .collect();
    let bridge = conf.bridge_name();
    let bridge = kernel
        .link(Side::Host, bridge)
        .map_err(nl_err(format!("cannot read bridge {bridge}")))?;
    if let Some(bridge) = bridge {
        let links = kernel
            .links(Side::Host)
            .map_err(|e| CniError::netlink("cannot list links", &e))?;
        for l in links {
            if l.master == Some(bridge.index)
                && names::is_host_veth(&l.name)
                && !keep_veths.contains(&l.name)
            {
                kernel
                    .delete_link(Side::Host, &l.name)
                    .map_err(nl_err(format!("cannot delete {}", l.name)))?;
            }
        }
    }
    if conf.ip_masq {
        let keep: HashSet<String> = valid
            .iter()
            .map(|o| names::masq_chain(&conf.name, &o.id, &o.ifname))
            .collect();
        teardown_masq(conf, fw, |c| !keep.contains(c))?;
    }
    Ok(())
}
