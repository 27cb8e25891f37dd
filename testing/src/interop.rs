//! Clients and servers Keelson did not write, installed once by `scripts/interop/*`. Among them
//! kmock's Kubernetes emulator (PyPI `kmock`), for the node components' tests: it serves plain
//! HTTP on 127.0.0.1 with no authentication, keeps objects as posted (no resourceVersion, uid or
//! defaults), ignores selectors and streams watches without resourceVersions or bookmarks: what
//! a component must survive when it "joins any API server".

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::hosts::command_in;
use crate::process::{wait_until, ChildGuard};
use crate::{free_port, repo_root, TestHost};

pub struct Kmock {
    /// Killed on drop.
    _child: ChildGuard,
    pub dir: tempfile::TempDir,
    pub url: String,
}

/// Runs `scripts/interop/NAME` (which installs a client or server Keelson did not write, once);
/// returns the last line it printed (what to run).
pub fn install(name: &str) -> String {
    let setup = repo_root().join("scripts/interop").join(name);
    let out = Command::new(&setup)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", setup.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        setup.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("the setup prints what to run on its last line")
        .trim()
        .to_string()
}

impl Kmock {
    /// The emulator on 127.0.0.1 serving `resources` (kmock's names: "v1/services",
    /// "discovery.k8s.io/v1/endpointslices"), ready for connections.
    pub fn start(resources: &[&str]) -> Kmock {
        Kmock::start_on(None, "127.0.0.1", resources)
    }

    /// The same inside test host `host`, on `address` there (reached through its links).
    pub fn start_in(host: &TestHost, address: &str, resources: &[&str]) -> Kmock {
        Kmock::start_on(Some(host), address, resources)
    }

    fn start_on(host: Option<&TestHost>, address: &str, resources: &[&str]) -> Kmock {
        let python = install("kmock");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let log = dir.path().join("kmock.log");
        let mut cmd = command_in(host.map(TestHost::path).as_deref(), python);
        cmd.arg(repo_root().join("testing/kmock/emulator.py"))
            .args([address, &port.to_string()])
            .args(resources);
        let child = ChildGuard::spawn_logged(&mut cmd, &log);
        let url = format!("http://{address}:{port}");
        let kmock = Kmock {
            _child: child,
            dir,
            url,
        };
        wait_until("kmock listening", Duration::from_secs(30), || {
            kmock.log().contains("listening on")
        });
        kmock
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kmock.log")).unwrap_or_default()
    }

    /// A kubeconfig for the emulator: its URL, no credentials (it takes none).
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kmock\n  cluster:\n    server: {}\n\
             users:\n- name: anyone\n  user: {{}}\ncontexts:\n- name: kmock\n  context:\n    \
             cluster: kmock\n    user: anyone\ncurrent-context: kmock\n",
            self.url
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// A kube-rs client for the emulator, to write the objects the components read.
    pub async fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("url"));
        kube::Client::try_from(config).expect("client")
    }
}
