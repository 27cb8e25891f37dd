//! Running the rule tools (iptables-restore, nft, conntrack). Behind a trait so backends can be
//! tested with a recording fake, and optionally inside another network namespace.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::error::ProxyError;

/// Output of one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdOutput {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CmdOutput {
    pub fn success(&self) -> bool {
        self.status == 0
    }

    /// The `Command` error for this failed output of `program` doing `what`.
    pub fn failure(&self, program: &str, what: &str) -> ProxyError {
        ProxyError::Command {
            program: program.to_string(),
            what: what.to_string(),
            status: self.status,
            stderr: self.stderr.trim().chars().take(2000).collect(),
        }
    }
}

/// Runs one program with arguments and optional stdin.
pub trait Runner: Send + Sync {
    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<CmdOutput, ProxyError>;
}

/// The real runner; with `netns` set every command runs in that network namespace
/// (the proxy itself may stay in another one, e.g. to reach the API server).
pub struct CommandRunner {
    netns: Option<(PathBuf, Arc<File>)>,
}

impl CommandRunner {
    pub fn host() -> CommandRunner {
        CommandRunner { netns: None }
    }

    pub fn in_netns(path: &Path) -> Result<CommandRunner, ProxyError> {
        let file = File::open(path).map_err(|e| ProxyError::Netns {
            path: path.display().to_string(),
            source: e,
        })?;
        Ok(CommandRunner {
            netns: Some((path.to_path_buf(), Arc::new(file))),
        })
    }
}

impl Runner for CommandRunner {
    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<CmdOutput, ProxyError> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((_, file)) = &self.netns {
            let fd = file.as_raw_fd();
            // SAFETY: setns is async-signal-safe and only affects the forked child.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let spawn_err = |e: std::io::Error| ProxyError::Spawn {
            program: program.to_string(),
            source: e,
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(data).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        Ok(CmdOutput {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// One command seen by the fake runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCmd {
    pub program: String,
    pub args: Vec<String>,
    pub stdin: String,
}

/// A fake runner: records commands and answers from a script of canned outputs
/// (the default answer is success with empty output).
#[derive(Clone, Default)]
pub struct FakeRunner {
    pub calls: Arc<Mutex<Vec<RecordedCmd>>>,
    /// Answers matched by "program arg0 arg1..." prefix; first match wins.
    pub answers: Arc<Mutex<Vec<(String, CmdOutput)>>>,
}

impl FakeRunner {
    pub fn answer(&self, prefix: &str, out: CmdOutput) {
        if let Ok(mut a) = self.answers.lock() {
            a.push((prefix.to_string(), out));
        }
    }

    pub fn take_calls(&self) -> Vec<RecordedCmd> {
        self.calls
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

impl Runner for FakeRunner {
    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<CmdOutput, ProxyError> {
        let line = std::iter::once(program)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        if let Ok(mut c) = self.calls.lock() {
            c.push(RecordedCmd {
                program: program.to_string(),
                args: args.iter().map(|a| a.to_string()).collect(),
                stdin: stdin
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .unwrap_or_default(),
            });
        }
        let answers = self.answers.lock().map(|a| a.clone()).unwrap_or_default();
        Ok(answers
            .into_iter()
            .find(|(p, _)| line.starts_with(p.as_str()))
            .map(|(_, o)| o)
            .unwrap_or_default())
    }
}
