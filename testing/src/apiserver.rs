//! A real keelson-apiserver per test, in its own data directory: on a free loopback port, or
//! inside a test host at a given address. Ready once `/readyz` answers; killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::hosts::TestHost;
use crate::kubectl::Kubectl;
use crate::process::{eventually, ChildGuard};

/// The components that run with an identity of their own (scripts/up issues each a kubeconfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    ControllerManager,
    Scheduler,
    Proxy,
    Ingress,
}

impl Component {
    /// The user its client certificate names, as upstream (and the bootstrap policy) calls it.
    pub fn user(self) -> &'static str {
        match self {
            Component::ControllerManager => "system:kube-controller-manager",
            Component::Scheduler => "system:kube-scheduler",
            Component::Proxy => "system:kube-proxy",
            Component::Ingress => "keelson:ingress-controller",
        }
    }
}

/// What servers of one cluster share (kubeadm's "certificates to copy"): the CA that signs
/// serving and client certificates, the service-account signing key, and the admin token.
pub const SHARED_FILES: [&str; 4] = ["ca.crt", "ca.key", "sa.key", "admin.token"];

pub struct Apiserver {
    child: Option<ChildGuard>,
    pub dir: tempfile::TempDir,
    /// The address clients use (127.0.0.1, or the address in the test host).
    pub address: String,
    /// The port it serves on (0 until the first start has written its kubeconfig).
    pub port: u16,
    netns: Option<PathBuf>,
    extra: Vec<String>,
}

impl Apiserver {
    /// On 127.0.0.1, a port the kernel picks.
    pub fn start() -> Apiserver {
        Apiserver::start_with(&[])
    }

    /// `start` with more flags.
    pub fn start_with(extra: &[&str]) -> Apiserver {
        let mut s = Apiserver::new(None, "127.0.0.1", extra);
        s.extra
            .splice(0..0, ["--bind-address".into(), "127.0.0.1".into()]);
        s.spawn();
        s
    }

    /// A second server of the same cluster, on 127.0.0.1 (`extra` names the shared store, e.g.
    /// `--etcd-servers`): its data directory gets `first`'s CA, service-account key and admin
    /// token before its first start, as kubeadm copies them to another control-plane machine,
    /// so certificates, tokens and kubeconfigs of either server work on both.
    pub fn start_sharing(first: &Apiserver, extra: &[&str]) -> Apiserver {
        let mut s = Apiserver::new(None, "127.0.0.1", extra);
        s.extra
            .splice(0..0, ["--bind-address".into(), "127.0.0.1".into()]);
        for f in SHARED_FILES {
            let (from, to) = (first.dir.path().join(f), s.dir.path().join(f));
            std::fs::copy(&from, &to)
                .unwrap_or_else(|e| panic!("copy {} to the second server: {e}", from.display()));
        }
        s.spawn();
        s
    }

    /// Inside `host`, serving on `address:6443` (the address must be on one of the host's links).
    pub fn start_in(host: &TestHost, address: &str, extra: &[&str]) -> Apiserver {
        let mut s = Apiserver::new(Some(host.path()), address, extra);
        s.port = 6443;
        s.extra
            .splice(0..0, ["--advertise-address".into(), address.to_string()]);
        s.spawn();
        s
    }

    fn new(netns: Option<PathBuf>, address: &str, extra: &[&str]) -> Apiserver {
        let dir = tempfile::Builder::new()
            .prefix("keelson-apiserver-test")
            .tempdir()
            .expect("a temporary data directory");
        Apiserver {
            child: None,
            dir,
            address: address.to_string(),
            port: 0,
            netns,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn spawn(&mut self) {
        let bin = crate::binary("keelson-apiserver");
        let mut cmd = self.in_host(bin);
        cmd.arg("--data-dir")
            .arg(self.dir.path())
            // A restart keeps the port, so clients made before it still reach the server.
            .args(["--secure-port", &self.port.to_string()])
            .args(&self.extra);
        self.child = Some(ChildGuard::spawn_logged(&mut cmd, &self.log_path()));
        self.wait_ready();
    }

    /// Waits until the kubeconfig is written and `/readyz` answers (20 s), else panics with the log.
    pub fn wait_ready(&mut self) {
        let port = eventually(
            "keelson-apiserver to write its kubeconfig",
            Duration::from_secs(20),
            || {
                self.exited()?;
                kubeconfig_port(&self.kubeconfig()).ok_or_else(|| "no kubeconfig yet".to_string())
            },
        );
        self.port = port;
        let url = self.url("/readyz");
        eventually("keelson-apiserver /readyz", Duration::from_secs(20), || {
            self.exited()?;
            let out = self
                .in_host("curl")
                .args(["-sfk", "-m", "1", &url])
                .output();
            match out {
                Ok(o) if o.status.success() => Ok(()),
                Ok(_) => Err(format!("not ready; log:\n{}", self.log())),
                Err(e) => Err(format!("curl is needed (apt-get install curl): {e}")),
            }
        });
    }

    /// An error holding the log when the server has exited.
    fn exited(&mut self) -> Result<(), String> {
        let running = self.child.as_mut().is_none_or(ChildGuard::is_running);
        if running {
            Ok(())
        } else {
            Err(format!("keelson-apiserver exited; log:\n{}", self.log()))
        }
    }

    fn in_host(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        crate::hosts::command_in(self.netns.as_deref(), program)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("apiserver.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// A kubeconfig for `user` in `groups`, with a client certificate signed by this server's
    /// CA (`keelson-apiserver kubeconfig`): how each component gets its own identity.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> PathBuf {
        let file: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let out = self.dir.path().join(format!("{file}.kubeconfig"));
        let mut cmd = Command::new(crate::binary("keelson-apiserver"));
        cmd.arg("kubeconfig")
            .arg("--data-dir")
            .arg(self.dir.path())
            .args(["--user", user, "--server", &self.url("")])
            .arg("--out")
            .arg(&out);
        for g in groups {
            cmd.args(["--group", g]);
        }
        let done = cmd.output().expect("run keelson-apiserver kubeconfig");
        assert!(
            done.status.success(),
            "keelson-apiserver kubeconfig --user {user}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        out
    }

    /// The kubeconfig `scripts/up` gives `component`: its own user, with what the bootstrap RBAC
    /// policy grants it.
    pub fn kubeconfig_of(&self, component: Component) -> PathBuf {
        self.kubeconfig_for(component.user(), &[])
    }

    /// The admin bearer token.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("admin.token"))
            .expect("admin.token in the data directory")
            .trim()
            .to_string()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}:{}{path}", self.address, self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(ChildGuard::pid)
    }

    /// kill -9, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill9();
        }
    }

    /// SIGTERM; panics unless it exits cleanly within 10 s.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let status = c.terminate(Duration::from_secs(10));
            assert!(
                status.is_some_and(|s| s.success()),
                "keelson-apiserver did not exit cleanly on SIGTERM ({status:?}); log:\n{}",
                self.log()
            );
        }
    }

    /// Clean stop and start again on the same data directory and port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// `restart` with other extra flags.
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.stop();
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        if self.netns.is_none() {
            self.extra
                .splice(0..0, ["--bind-address".into(), "127.0.0.1".into()]);
        }
        self.spawn();
    }

    /// Start again after `kill9`.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "keelson-apiserver is still running");
        self.spawn();
    }

    /// kubectl with this server's admin kubeconfig (run in its test host, if any).
    pub fn kubectl_cmd(&self) -> Kubectl {
        Kubectl {
            kubeconfig: self.kubeconfig(),
            netns: self.netns.clone(),
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd().output(args)
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_cmd().ok(args)
    }

    /// `kubectl get <what> -o jsonpath=<path>` that must succeed.
    pub fn jsonpath_ok(&self, what: &[&str], path: &str) -> String {
        self.kubectl_cmd().jsonpath_ok(what, path)
    }

    /// `kubectl patch KIND NAME --type=merge -p PATCH`; `Err` with kubectl's message.
    pub fn patch_merge(&self, kind: &str, name: &str, patch: &str) -> Result<String, String> {
        self.kubectl_cmd().patch_merge(kind, name, patch)
    }

    /// kubectl with a manifest on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        self.kubectl_cmd().with_stdin(args, input)
    }

    /// `kubectl apply -f -` that must succeed.
    pub fn apply(&self, yaml: &str) -> String {
        self.kubectl_cmd().apply(yaml)
    }

    /// An HTTP request with curl: (status code, body). A body without a content type is JSON.
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (u16, String) {
        let mut cmd = self.in_host("curl");
        cmd.args([
            "-sSk",
            "-m",
            "10",
            "-X",
            method,
            "-w",
            "\n%{http_code}",
            &self.url(path),
        ]);
        if let Some(t) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        if let Some(ct) = content_type.or(body.map(|_| "application/json")) {
            cmd.args(["-H", &format!("Content-Type: {ct}")]);
        }
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        let out = cmd.output().expect("curl is needed (apt-get install curl)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// `curl` with the admin token.
    pub fn curl_admin(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String) {
        self.curl(method, path, content_type, body, Some(&self.token()))
    }

    /// A kube-rs client with the admin kubeconfig, built the way the daemons build theirs.
    pub async fn client(&self) -> kube::Client {
        keelson_daemon::client(Some(&self.kubeconfig()))
            .await
            .expect("a client from the admin kubeconfig")
    }

    /// The sum of a metric's samples from /metrics (0 when absent); read with the admin token,
    /// as /metrics needs credentials.
    pub fn metric(&self, name_and_labels: &str) -> f64 {
        let (_, text) = self.curl_admin("GET", "/metrics", None, None);
        crate::metric_sum(&text, name_and_labels)
    }
}

/// The port of the `server:` URL in a kubeconfig the API server wrote.
fn kubeconfig_port(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))?;
    server
        .trim()
        .trim_matches('"')
        .rsplit(':')
        .next()?
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// `keelson-apiserver ARGS` run as an admin command (snapshot, quarantine, migrate, ...):
/// whether it succeeded, and its stdout then stderr.
pub fn admin(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = std::process::Command::new(crate::binary("keelson-apiserver"))
        .args(args)
        .output()
        .expect("keelson-apiserver runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}
