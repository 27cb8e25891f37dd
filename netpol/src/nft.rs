//! Loading a transaction with `nft -f -`: behind a trait so the loop can be tested without a
//! kernel; the real one can run inside another network namespace (tests, `--netns`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("nft refused the transaction: {stderr}")]
    Refused { stderr: String },
}

pub trait Nft: Send + Sync {
    /// Loads `script` as one transaction (all or nothing).
    fn load(&self, script: &str) -> Result<(), NftError>;
}

/// The machine's `nft`; with `netns` set it runs through `nsenter --net=<netns>`.
pub struct NftCli {
    pub netns: Option<PathBuf>,
}

impl Nft for NftCli {
    fn load(&self, script: &str) -> Result<(), NftError> {
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("nft");
                c
            }
            None => Command::new("nft"),
        };
        cmd.args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let spawn = |source| NftError::Spawn {
            program: "nft".into(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes()).map_err(spawn)?;
        }
        let out = child.wait_with_output().map_err(spawn)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(NftError::Refused {
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }
}
