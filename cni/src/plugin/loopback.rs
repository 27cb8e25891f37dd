//! The loopback plugin (containerd expects one named `loopback` in its CNI bin dir).

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnetwork::{IpNetwork, Ipv4Network};

use crate::config::NetConf;
use crate::env::{CniEnv, Command};
use crate::error::{code, CniError, Result};
use crate::kernel::{Kernel, LinkDetails, Rtnl, Side};
use crate::result::{CniResult, Interface, IpConfig};

// 127.0.0.1/8, built at compile time so that it cannot fail at run time.
const LOOPBACK_V4: Ipv4Network = match Ipv4Network::new_checked(Ipv4Addr::LOCALHOST, 8) {
    Some(net) => net,
    None => panic!("127.0.0.1/8 is valid"),
};

pub fn handle(cmd: Command, env: &CniEnv, conf: &NetConf) -> Result<Option<String>> {
    match cmd {
        Command::Add => add(env, conf).map(|r| Some(r.to_json(&conf.cni_version))),
        Command::Del => del(env).map(|_| None),
        Command::Check => check(env).map(|_| None),
        Command::Gc | Command::Status | Command::Version => Ok(None),
    }
}

/// `lo` in the container's namespace.
fn lo(kernel: &mut dyn Kernel, env: &CniEnv) -> Result<LinkDetails> {
    kernel
        .link(Side::Container, "lo")
        .map_err(|e| CniError::netlink("cannot read lo", &e))?
        .ok_or_else(|| CniError::new(code::NETLINK, format!("no lo in {}", env.netns), ""))
}

fn add(env: &CniEnv, conf: &NetConf) -> Result<CniResult> {
    let mut kernel = Rtnl::in_container(&env.netns)?;
    let lo = lo(&mut kernel, env)?;
    kernel
        .set_up(Side::Container, lo.index, false)
        .map_err(|e| CniError::netlink("cannot bring lo up", &e))?;
    let ip = |address: IpNetwork| IpConfig {
        interface: Some(0),
        address,
        gateway: None,
        version: None,
    };
    Ok(CniResult {
        cni_version: conf.cni_version.clone(),
        interfaces: vec![Interface {
            name: "lo".into(),
            mac: "00:00:00:00:00:00".into(),
            sandbox: env.netns.clone(),
            ..Default::default()
        }],
        ips: vec![
            ip(IpNetwork::V4(LOOPBACK_V4)),
            ip(IpNetwork::V6(Ipv6Addr::LOCALHOST.into())),
        ],
        ..Default::default()
    })
}

fn del(env: &CniEnv) -> Result<()> {
    let mut kernel = Rtnl::if_container(&env.netns);
    // Nothing to do when the namespace is already gone.
    if !kernel.has_container() {
        return Ok(());
    }
    let lo = lo(&mut kernel, env)?;
    kernel
        .set_down(Side::Container, lo.index)
        .map_err(|e| CniError::netlink("cannot bring lo down", &e))
}

fn check(env: &CniEnv) -> Result<()> {
    if lo(&mut Rtnl::in_container(&env.netns)?, env)?.up {
        return Ok(());
    }
    Err(CniError::new(
        code::CHECK_FAILED,
        format!("lo is down in {}", env.netns),
        "",
    ))
}
