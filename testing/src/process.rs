//! Child processes that end with the test, commands whose failure is a readable message, and
//! polling with a deadline.

use std::fs::File;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A child process killed (SIGKILL) and reaped when dropped, so a failing test leaves none behind.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        ChildGuard(Some(child))
    }

    /// Spawns `cmd` with stdin closed and stdout+stderr appended to `log`.
    pub fn spawn_logged(cmd: &mut Command, log: &Path) -> Self {
        let file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open log {}: {e}", log.display()));
        let err = file.try_clone().expect("clone log file handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        ChildGuard::new(child)
    }

    pub fn pid(&self) -> Option<u32> {
        self.0.as_ref().map(Child::id)
    }

    /// Whether the process is still running (false once it exited or was stopped).
    pub fn is_running(&mut self) -> bool {
        match self.0.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The exit status once the process has exited (None while it runs or after `kill9`).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.0.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends `signal` without waiting.
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid as i32), signal);
        }
    }

    /// SIGTERM, then waits up to `grace` for the exit (SIGKILL after). Returns the exit status,
    /// or None when the process had to be killed or was already gone.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.0.take()?;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// kill -9, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs a command to the end: its stdout, or a message naming the command, status and output.
pub fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `run` for a command a test cannot go on without: panics with the message.
pub fn run_ok(cmd: &mut Command) -> String {
    run(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Polls `check` every 50 ms until it returns Ok, and returns that value; panics after `timeout`
/// with `what` and the last error.
pub fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `eventually` for a plain condition.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    eventually(what, timeout, || {
        check().then_some(()).ok_or_else(|| "not yet".into())
    })
}
