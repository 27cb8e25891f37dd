//! The same binary run as an IPAM plugin (`"ipam": {"type": "keelson-ipam"}` under another
//! main plugin, or invoked under the name keelson-ipam).

use super::store::Owner;
use crate::config::NetConf;
use crate::env::{CniEnv, Command};
use crate::error::Result;

pub fn handle(cmd: Command, env: &CniEnv, conf: &NetConf) -> Result<Option<String>> {
    let plan = conf.ipam()?.plan(&conf.name)?;
    let owner = Owner::new(&env.container_id, &env.ifname);
    let prev_ips = conf.prev_ips();
    match cmd {
        Command::Add => {
            let got = super::allocate(&plan, &owner)?;
            Ok(Some(
                super::to_result(&plan, &got).to_json(&conf.cni_version),
            ))
        }
        Command::Del => {
            super::release(&plan, &owner, &prev_ips)?;
            Ok(None)
        }
        Command::Check => {
            super::check(&plan, &owner, &prev_ips)?;
            Ok(None)
        }
        Command::Gc => {
            super::gc(&plan, &conf.valid_owners())?;
            Ok(None)
        }
        Command::Status => {
            super::status(&plan)?;
            Ok(None)
        }
        Command::Version => Ok(None),
    }
}
