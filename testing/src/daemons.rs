//! Keelson's API-client daemons (controller manager, scheduler, ...) started against a test
//! API server with their own identities, as scripts/up starts them.

use crate::{binary, free_port, Apiserver, ChildGuard, Component};
use std::path::PathBuf;
use std::process::Command;

/// One running daemon: killed with its guard, its log in the API server's folder.
pub struct Daemon {
    guard: ChildGuard,
    /// Its --metrics-bind-address (/healthz and /metrics).
    pub metrics: String,
    pub log_path: PathBuf,
}

impl Daemon {
    /// `binary` (e.g. "keelson-scheduler") with `who`'s kubeconfig, a free metrics port, and
    /// `flags`; its log is <api dir>/<binary>.log.
    pub fn start(api: &Apiserver, binary_name: &str, who: Component, flags: &[&str]) -> Daemon {
        Daemon::start_logged(api, binary_name, who, binary_name, flags)
    }

    /// `start` with its log in <api dir>/<log_name>.log: one of several replicas of a daemon
    /// (leader election tests).
    pub fn start_logged(
        api: &Apiserver,
        binary_name: &str,
        who: Component,
        log_name: &str,
        flags: &[&str],
    ) -> Daemon {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(binary(binary_name));
        cmd.arg("--kubeconfig")
            .arg(api.kubeconfig_of(who))
            .args(["--metrics-bind-address", &metrics])
            .args(flags);
        let log_path = api.dir.path().join(format!("{log_name}.log"));
        Daemon {
            guard: ChildGuard::spawn_logged(&mut cmd, &log_path),
            metrics,
            log_path,
        }
    }

    /// The controller manager as the node-less tests want it: no agent renews a Lease there,
    /// so node lifecycle must not mark nodes NotReady and evict the tests' pods.
    pub fn controller_manager(api: &Apiserver, flags: &[&str]) -> Daemon {
        let mut all = vec!["--node-monitor-grace-period=1h"];
        all.extend_from_slice(flags);
        Daemon::start(
            api,
            "keelson-controller-manager",
            Component::ControllerManager,
            &all,
        )
    }

    /// kill -9, as a crash would.
    pub fn kill9(&mut self) {
        self.guard.kill9();
    }

    /// SIGTERM; its exit status if it exits within `grace` (else SIGKILL and None).
    pub fn terminate(&mut self, grace: std::time::Duration) -> Option<std::process::ExitStatus> {
        self.guard.terminate(grace)
    }

    /// Its exit status once it has exited by itself (None while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.guard.exit_status()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The sum of a metric's samples from its /metrics (None until it answers).
    pub fn metric(&self, name_and_labels: &str) -> Option<f64> {
        let url = format!("http://{}/metrics", self.metrics);
        let out = Command::new("curl")
            .args(["-sf", "-m", "2", &url])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| crate::metric_sum(&String::from_utf8_lossy(&out.stdout), name_and_labels))
    }
}
