//! The nginx child: check a candidate config with `nginx -t`, swap it in atomically, start or
//! reload (SIGHUP), and stop (SIGQUIT). Behind a trait so the controller can be tested without it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::NginxError;
use crate::tls::Cert;

pub trait Nginx: Send {
    /// Makes `text` the running configuration if nginx accepts it; otherwise the running one
    /// stays. `certs` are the certificate files `text` refers to (under certs/).
    fn apply(&mut self, text: &str, certs: &[Cert]) -> Result<(), NginxError>;
    /// `nginx -t` of `text` alone; the running configuration is not touched.
    fn test(&mut self, text: &str, certs: &[Cert]) -> Result<(), NginxError>;
    /// False when the nginx process has exited (or was never started).
    fn running(&mut self) -> bool;
    /// Graceful stop: in-flight requests finish.
    fn stop(&mut self) -> Result<(), NginxError>;
}

/// A real nginx process owned by this one, all of its files under `dir`.
pub struct NginxProcess {
    binary: PathBuf,
    dir: PathBuf,
    child: Option<Child>,
}

const CONF: &str = "nginx.conf";
const CANDIDATE: &str = "nginx.conf.candidate";
/// Where a piece of the configuration is tested on its own (never loaded).
const TRIAL: &str = "nginx.conf.trial";
const STDERR_LOG: &str = "logs/nginx.stderr";
/// Must match the `pid` directive render.rs writes.
const PID_FILE: &str = "nginx.pid";

impl NginxProcess {
    pub fn new(binary: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        NginxProcess {
            binary: binary.into(),
            dir: dir.into(),
            child: None,
        }
    }

    pub fn conf_path(&self) -> PathBuf {
        self.dir.join(CONF)
    }

    fn prepare_dirs(&self) -> Result<(), NginxError> {
        for sub in ["logs", "tmp", "certs"] {
            let p = self.dir.join(sub);
            fs::create_dir_all(&p).map_err(|e| NginxError::io("create directory", &p, e))?;
        }
        Ok(())
    }

    /// `nginx -t` on the candidate; nginx's own message on failure.
    fn check(&self, candidate: &Path) -> Result<(), NginxError> {
        let out = self
            .command(candidate)
            .arg("-t")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| NginxError::io("run nginx -t", &self.binary, e))?;
        if out.status.success() {
            return Ok(());
        }
        Err(NginxError::Rejected {
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    fn command(&self, conf: &Path) -> Command {
        let mut c = Command::new(&self.binary);
        c.arg("-p").arg(&self.dir).arg("-c").arg(conf);
        c
    }

    fn start(&mut self) -> Result<(), NginxError> {
        let log_path = self.dir.join(STDERR_LOG);
        let log =
            fs::File::create(&log_path).map_err(|e| NginxError::io("create", &log_path, e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| NginxError::io("open", &log_path, e))?;
        let mut cmd = self.command(&self.conf_path());
        cmd.args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        // If this controller dies without stopping nginx, the kernel stops nginx too, so no
        // orphan keeps serving an outdated config. The spawning thread lives as long as the
        // process (see worker.rs), which PR_SET_PDEATHSIG requires.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
                // Its own process group, so workers orphaned by a crashed master can be found
                // and stopped (they would keep the port and serve an old config).
                nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| NginxError::io("start", &self.binary, e))?;
        // nginx writes its pid file only once its ports are bound (it retries a busy port for
        // a few seconds first), so the pid file says it really serves; an exit says it won't.
        let pid_file = self.dir.join(PID_FILE);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                kill_group(child.id());
                let message = fs::read_to_string(&log_path).unwrap_or_default();
                return Err(NginxError::Exited {
                    status: status.to_string(),
                    message: message.trim().to_string(),
                });
            }
            let written = fs::read_to_string(&pid_file).unwrap_or_default();
            if written.trim() == child.id().to_string() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::info!(pid = child.id(), conf = %self.conf_path().display(), "nginx started");
        self.child = Some(child);
        Ok(())
    }

    fn signal(&self, sig: Signal) -> Result<(), NginxError> {
        let Some(child) = &self.child else {
            return Ok(());
        };
        kill(Pid::from_raw(child.id() as i32), sig).map_err(|e| NginxError::Signal {
            signal: sig.as_str(),
            message: e.to_string(),
        })
    }

    /// Names carry a content hash: an existing file already has the right content.
    fn write_certs(&self, certs: &[Cert]) -> Result<(), NginxError> {
        for c in certs {
            let path = self.dir.join("certs").join(&c.file);
            if !path.exists() {
                write_atomically(&path, &c.pem)?;
            }
        }
        Ok(())
    }

    /// Certificates no loaded config refers to any more (renewed, or their Ingress gone).
    fn remove_stale_certs(&self, certs: &[Cert]) {
        let Ok(entries) = fs::read_dir(self.dir.join("certs")) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if !certs.iter().any(|c| name.to_str() == Some(c.file.as_str())) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// SIGKILL to nginx's process group (its master's pid): whatever of it is left.
fn kill_group(master: u32) {
    let _ = kill(Pid::from_raw(-(master as i32)), Signal::SIGKILL);
}

/// Writes `path` so readers see the old or the new content, never a mix. Mode 0600: the files
/// hold private keys, and only nginx's master (root) reads them.
fn write_atomically(path: &Path, text: &str) -> Result<(), NginxError> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| NginxError::io("create", &tmp, e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| NginxError::io("write", &tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| NginxError::io("rename into place", path, e))
}

impl Nginx for NginxProcess {
    fn apply(&mut self, text: &str, certs: &[Cert]) -> Result<(), NginxError> {
        self.prepare_dirs()?;
        self.write_certs(certs)?;
        let candidate = self.dir.join(CANDIDATE);
        write_atomically(&candidate, text)?;
        self.check(&candidate)?;
        let conf = self.conf_path();
        fs::rename(&candidate, &conf).map_err(|e| NginxError::io("rename into place", &conf, e))?;
        if self.running() {
            // A graceful reload: on SIGHUP the master starts new workers with the new text and
            // asks the old ones to stop accepting and exit once their requests (to endpoints
            // now dropped, too) have finished, so an endpoint change loses no request in
            // flight. The listening sockets are the master's and never close.
            self.signal(Signal::SIGHUP)?;
        } else {
            self.start()?;
        }
        self.remove_stale_certs(certs);
        Ok(())
    }

    fn test(&mut self, text: &str, certs: &[Cert]) -> Result<(), NginxError> {
        self.prepare_dirs()?;
        self.write_certs(certs)?;
        let trial = self.dir.join(TRIAL);
        write_atomically(&trial, text)?;
        self.check(&trial)
    }

    fn running(&mut self) -> bool {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(Ok(Some(status))) => {
                // Its last words (a crash, or a bind that failed on a later reload).
                let stderr = fs::read_to_string(self.dir.join(STDERR_LOG)).unwrap_or_default();
                let last = stderr.lines().last().unwrap_or("").to_string();
                tracing::warn!(%status, nginx = %last, "nginx exited");
                if let Some(c) = self.child.take() {
                    kill_group(c.id());
                }
                false
            }
            _ => false,
        }
    }

    fn stop(&mut self) -> Result<(), NginxError> {
        if !self.running() {
            return Ok(());
        }
        self.signal(Signal::SIGQUIT)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !self.running() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Graceful stop timed out (a stuck connection); do not leave nginx behind.
        if let Some(mut c) = self.child.take() {
            kill_group(c.id());
            let _ = c.wait();
        }
        Ok(())
    }
}

impl Drop for NginxProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
