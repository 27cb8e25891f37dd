//! Keelson's API-client daemons (controller manager, scheduler, ...) started against a test
//! API server with their own identities, as scripts/up starts them.

use crate::{binary, free_port, Apiserver, ChildGuard, Component};
use std::path::PathBuf;
use std::process::Command;

/// One running daemon: killed with its guard, its log in the API server's folder.
pub struct Daemon {
    _guard: ChildGuard,
    /// Its --metrics-bind-address (/healthz and /metrics).
    pub metrics: String,
    pub log_path: PathBuf,
}

impl Daemon {
    /// `binary` (e.g. "keelson-scheduler") with `who`'s kubeconfig, a free metrics port, and
    /// `flags`; its log is <api dir>/<binary>.log.
    pub fn start(api: &Apiserver, binary_name: &str, who: Component, flags: &[&str]) -> Daemon {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new(binary(binary_name));
        cmd.arg("--kubeconfig")
            .arg(api.kubeconfig_of(who))
            .args(["--metrics-bind-address", &metrics])
            .args(flags);
        let log_path = api.dir.path().join(format!("{binary_name}.log"));
        Daemon {
            _guard: ChildGuard::spawn_logged(&mut cmd, &log_path),
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
