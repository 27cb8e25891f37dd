//! Runs another IPAM plugin from CNI_PATH (when "ipam.type" is not keelson-ipam), the way a
//! runtime would: same environment, the network configuration on stdin.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::env::CniEnv;
use crate::error::{code, CniError, Result};
use crate::result::CniResult;

fn find(env: &CniEnv, plugin: &str) -> Result<PathBuf> {
    if plugin.is_empty() || plugin.contains('/') {
        return Err(CniError::config(format!("invalid ipam type {plugin:?}")));
    }
    env.path
        .iter()
        .map(|dir| PathBuf::from(dir).join(plugin))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            CniError::new(
                code::DELEGATE,
                format!("IPAM plugin {plugin:?} not found in CNI_PATH"),
                format!(
                    "searched {:?}; install it or use \"type\": \"keelson-ipam\"",
                    env.path
                ),
            )
        })
}

/// Runs `command` on the IPAM plugin; returns its stdout on success.
pub fn run(env: &CniEnv, plugin: &str, command: &str, stdin: &[u8]) -> Result<String> {
    let path = find(env, plugin)?;
    let spawn_err = |e: std::io::Error| {
        CniError::new(
            code::DELEGATE,
            format!("cannot run IPAM plugin {}", path.display()),
            e.to_string(),
        )
    };
    let mut child = Command::new(&path)
        .env("CNI_COMMAND", command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(spawn_err)?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin).map_err(spawn_err)?;
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    // Pass the delegate's own error through when it printed one.
    #[derive(serde::Deserialize)]
    struct Err {
        code: u32,
        #[serde(default)]
        msg: String,
        #[serde(default)]
        details: String,
    }
    match serde_json::from_str::<Err>(&stdout) {
        Ok(e) => Err(CniError::new(
            e.code,
            format!("IPAM plugin {plugin}: {}", e.msg),
            e.details,
        )),
        Err(_) => Err(CniError::new(
            code::DELEGATE,
            format!("IPAM plugin {plugin} failed with {}", out.status),
            stdout,
        )),
    }
}

pub fn add(env: &CniEnv, plugin: &str, stdin: &[u8]) -> Result<CniResult> {
    let out = run(env, plugin, "ADD", stdin)?;
    serde_json::from_str(&out).map_err(|e| {
        CniError::new(
            code::DECODE_FAILURE,
            format!("cannot decode IPAM plugin {plugin}'s result"),
            e.to_string(),
        )
    })
}
