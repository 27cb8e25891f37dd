//! The plugins this binary can be: bridge (keelson-cni), IPAM (keelson-ipam), loopback.

pub mod bridge_add;
pub mod bridge_check;
pub mod bridge_del;
#[cfg(test)]
mod bridge_tests;
pub mod delegate;
pub mod ipam_backend;
pub mod loopback;
pub mod routes;

use crate::config::NetConf;
use crate::env::{CniEnv, Command};
use crate::error::{CniError, Result};
use crate::ipam::config::BUILTIN_TYPE;
use crate::kernel::Kernel;
use crate::masq::Firewall;

/// One invocation of the bridge plugin: the attachment, its network configuration, and stdin
/// as received (handed on unchanged to a delegated IPAM plugin).
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub env: &'a CniEnv,
    pub conf: &'a NetConf,
    pub stdin: &'a [u8],
}

/// What the bridge plugin changes on the node besides its IPAM files: links, addresses and
/// routes in the kernel, and the nat table.
pub struct Node<'a> {
    pub kernel: &'a mut dyn Kernel,
    pub fw: &'a dyn Firewall,
}

/// Maps a failed kernel call to a CNI error saying what was being done.
pub(crate) fn nl_err(what: String) -> impl FnOnce(std::io::Error) -> CniError {
    move |e| CniError::netlink(what, &e)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Bridge,
    Ipam,
    Loopback,
}

/// Chooses the role from the name the binary was run under, then from the configuration.
pub fn role(argv0: &str, conf: &NetConf) -> Role {
    let base = argv0.rsplit('/').next().unwrap_or(argv0);
    match base {
        "loopback" => return Role::Loopback,
        "keelson-ipam" => return Role::Ipam,
        _ => {}
    }
    match conf.plugin_type.as_str() {
        "loopback" => Role::Loopback,
        "keelson-cni" | "" => Role::Bridge,
        // Run by some other main plugin as its IPAM plugin.
        _ if conf
            .ipam
            .as_ref()
            .is_some_and(|i| i.plugin_type == BUILTIN_TYPE) =>
        {
            Role::Ipam
        }
        _ => Role::Bridge,
    }
}

pub fn bridge(cmd: Command, env: &CniEnv, conf: &NetConf, stdin: &[u8]) -> Result<Option<String>> {
    let req = Request { env, conf, stdin };
    match cmd {
        Command::Add => {
            let result = bridge_add::add(&req)?;
            Ok(Some(result.to_json(&conf.cni_version)))
        }
        Command::Del => bridge_del::del(&req).map(|_| None),
        Command::Check => bridge_check::check(&req).map(|_| None),
        Command::Gc => bridge_del::gc(&req).map(|_| None),
        Command::Status => ipam_backend::IpamBackend::from_conf(conf)?
            .status(env, stdin)
            .map(|_| None),
        Command::Version => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(json: &str) -> NetConf {
        NetConf::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn role_by_name_then_config() {
        let bridge = conf(r#"{"cniVersion":"1.0.0","name":"n","type":"keelson-cni"}"#);
        assert_eq!(role("/opt/cni/bin/keelson-cni", &bridge), Role::Bridge);
        assert_eq!(role("/opt/cni/bin/loopback", &bridge), Role::Loopback);
        assert_eq!(role("keelson-ipam", &bridge), Role::Ipam);
        let under_ref = conf(
            r#"{"cniVersion":"1.0.0","name":"n","type":"bridge","ipam":{"type":"keelson-ipam"}}"#,
        );
        assert_eq!(role("keelson-cni", &under_ref), Role::Ipam);
        let lo = conf(r#"{"cniVersion":"1.0.0","name":"n","type":"loopback"}"#);
        assert_eq!(role("keelson-cni", &lo), Role::Loopback);
    }
}
