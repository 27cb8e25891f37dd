//! keelson-cni: a CNI plugin (spec 1.0.0 and 1.1.0) that puts pods on a Linux bridge through
//! veth pairs with built-in host-local-compatible IPAM; the same binary also serves as the
//! `keelson-ipam` IPAM plugin and the `loopback` plugin.

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod config;
pub mod env;
pub mod error;
pub mod install;
pub mod ipam;
pub mod kernel;
pub mod masq;
pub mod names;
pub mod netns;
pub mod plugin;
pub mod reaper;
pub mod result;
pub mod sysctl;
pub mod version;

use config::NetConf;
use env::Command;
use error::{CniError, Result};

/// One invocation: what the runtime passed in.
pub struct Invocation<'a> {
    pub argv0: &'a str,
    pub stdin: &'a [u8],
    pub getenv: &'a dyn Fn(&str) -> Option<String>,
}

/// What to print on stdout and whether it is a failure.
pub struct Outcome {
    pub stdout: Option<String>,
    pub error: Option<CniError>,
}

pub fn run(inv: &Invocation) -> Outcome {
    match dispatch(inv) {
        Ok(stdout) => Outcome {
            stdout,
            error: None,
        },
        Err(e) => {
            // Answer in the version the caller asked for, when it was readable.
            let version =
                requested_version(inv.stdin).unwrap_or_else(|| version::LATEST.to_string());
            let e = e.with_version(&version);
            Outcome {
                stdout: Some(e.to_json()),
                error: Some(e),
            }
        }
    }
}

/// The supported cniVersion stdin asks for, read leniently (stdin may be no valid configuration).
fn requested_version(stdin: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(stdin).ok()?;
    let version = v.get("cniVersion")?.as_str()?;
    version::SUPPORTED
        .contains(&version)
        .then(|| version.to_string())
}

fn dispatch(inv: &Invocation) -> Result<Option<String>> {
    tracing::debug!("start");
    let (cmd, cni_env) = env::parse(inv.getenv)?;
    if cmd == Command::Version {
        let requested = requested_version(inv.stdin).unwrap_or_default();
        return Ok(Some(version::version_json(&requested)));
    }
    let conf = NetConf::parse(inv.stdin)?;
    if matches!(cmd, Command::Gc | Command::Status) && !version::at_least_1_1(&conf.cni_version) {
        return Err(CniError::new(
            error::code::INCOMPATIBLE_VERSION,
            format!(
                "{cmd:?} needs cniVersion 1.1.0 or later, config has {}",
                conf.cni_version
            ),
            "set \"cniVersion\": \"1.1.0\" in the network configuration",
        ));
    }
    if cmd == Command::Check && !version::has_check(&conf.cni_version) {
        return Err(CniError::new(
            error::code::INCOMPATIBLE_VERSION,
            format!(
                "CHECK needs cniVersion 0.4.0 or later, config has {}",
                conf.cni_version
            ),
            "CHECK was added in CNI spec 0.4.0",
        ));
    }
    match plugin::role(inv.argv0, &conf) {
        plugin::Role::Loopback => plugin::loopback::handle(cmd, &cni_env, &conf),
        plugin::Role::Ipam => ipam::plugin::handle(cmd, &cni_env, &conf),
        plugin::Role::Bridge => plugin::bridge(cmd, &cni_env, &conf, inv.stdin),
    }
}
