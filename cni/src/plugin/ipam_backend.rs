//! The bridge plugin's view of address management: built in, or a delegated plugin.

use std::collections::HashSet;
use std::net::IpAddr;

use crate::config::NetConf;
use crate::env::CniEnv;
use crate::error::Result;
use crate::ipam::{self, config::IpamPlan, store::Owner};
use crate::result::CniResult;

use super::delegate;

pub enum IpamBackend {
    Builtin(IpamPlan),
    Delegate(String),
}

impl IpamBackend {
    /// Validates the ipam section before anything is created.
    pub fn from_conf(conf: &NetConf) -> Result<IpamBackend> {
        let ipam = conf.ipam()?;
        if ipam.is_builtin() {
            Ok(IpamBackend::Builtin(ipam.plan(&conf.name)?))
        } else {
            Ok(IpamBackend::Delegate(ipam.plugin_type.clone()))
        }
    }

    pub fn add(&self, env: &CniEnv, stdin: &[u8]) -> Result<CniResult> {
        match self {
            IpamBackend::Builtin(plan) => {
                let owner = Owner::new(&env.container_id, &env.ifname);
                let got = ipam::allocate(plan, &owner)?;
                Ok(ipam::to_result(plan, &got))
            }
            IpamBackend::Delegate(t) => delegate::add(env, t, stdin),
        }
    }

    pub fn del(&self, env: &CniEnv, stdin: &[u8], hints: &[IpAddr]) -> Result<()> {
        match self {
            IpamBackend::Builtin(plan) => {
                ipam::release(plan, &Owner::new(&env.container_id, &env.ifname), hints).map(|_| ())
            }
            IpamBackend::Delegate(t) => delegate::run(env, t, "DEL", stdin).map(|_| ()),
        }
    }

    pub fn check(&self, env: &CniEnv, stdin: &[u8], ips: &[IpAddr]) -> Result<()> {
        match self {
            IpamBackend::Builtin(plan) => {
                ipam::check(plan, &Owner::new(&env.container_id, &env.ifname), ips)
            }
            IpamBackend::Delegate(t) => delegate::run(env, t, "CHECK", stdin).map(|_| ()),
        }
    }

    pub fn gc(&self, env: &CniEnv, stdin: &[u8], valid: &HashSet<Owner>) -> Result<()> {
        match self {
            IpamBackend::Builtin(plan) => ipam::gc(plan, valid).map(|_| ()),
            IpamBackend::Delegate(t) => delegate::run(env, t, "GC", stdin).map(|_| ()),
        }
    }

    pub fn status(&self, env: &CniEnv, stdin: &[u8]) -> Result<()> {
        match self {
            IpamBackend::Builtin(plan) => ipam::status(plan),
            IpamBackend::Delegate(t) => delegate::run(env, t, "STATUS", stdin).map(|_| ()),
        }
    }
}
