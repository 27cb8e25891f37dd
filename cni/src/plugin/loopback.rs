//! The loopback plugin (containerd expects one named `loopback` in its CNI bin dir).

use crate::config::NetConf;
use crate::env::{CniEnv, Command};
use crate::error::{code, CniError, Result};
use crate::netlink::link;
use crate::netns::NetNs;
use crate::result::{CniResult, Interface, IpConfig};

pub fn handle(cmd: Command, env: &CniEnv, conf: &NetConf) -> Result<Option<String>> {
    match cmd {
        Command::Add => add(env, conf).map(|r| Some(r.to_json(&conf.cni_version))),
        Command::Del => del(env).map(|_| None),
        Command::Check => check(env).map(|_| None),
        Command::Gc | Command::Status | Command::Version => Ok(None),
    }
}

fn with_lo<T>(
    env: &CniEnv,
    f: impl FnOnce(&mut crate::netlink::Netlink, u32, bool) -> Result<T>,
) -> Result<T> {
    let home =
        NetNs::current().map_err(|e| CniError::io("cannot open own network namespace", &e))?;
    let ns = super::bridge_add::open_netns(&env.netns)?;
    let mut nl = ns
        .netlink(&home)
        .map_err(|e| CniError::netlink(format!("cannot open netlink in {}", env.netns), &e))?;
    let lo = link::get(&mut nl, "lo")
        .map_err(|e| CniError::netlink("cannot read lo", &e))?
        .ok_or_else(|| CniError::new(code::NETLINK, format!("no lo in {}", env.netns), ""))?;
    f(&mut nl, lo.index, lo.up)
}

fn add(env: &CniEnv, conf: &NetConf) -> Result<CniResult> {
    with_lo(env, |nl, index, _| {
        link::set_up(nl, index, false).map_err(|e| CniError::netlink("cannot bring lo up", &e))
    })?;
    let ip = |a: &str| IpConfig {
        interface: Some(0),
        address: a.parse().expect("constant address"),
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
        ips: vec![ip("127.0.0.1/8"), ip("::1/128")],
        ..Default::default()
    })
}

fn del(env: &CniEnv) -> Result<()> {
    // Nothing to do when the namespace is already gone.
    if env.netns.is_empty() || NetNs::open(&env.netns).is_err() {
        return Ok(());
    }
    with_lo(env, |nl, index, _| {
        link::set_down(nl, index).map_err(|e| CniError::netlink("cannot bring lo down", &e))
    })
}

fn check(env: &CniEnv) -> Result<()> {
    with_lo(env, |_, _, up| {
        if up {
            Ok(())
        } else {
            Err(CniError::new(
                code::CHECK_FAILED,
                format!("lo is down in {}", env.netns),
                "",
            ))
        }
    })
}
