//! A real keelson-apiserver process per test, in its own data directory, and helpers to drive it
//! with the machine's kubectl, curl and kube-rs.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub port: u16,
    extra: Vec<String>,
}

fn free_port() -> u16 {
    // Bind to port 0 to learn a free port, then release it for the server.
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("keelson-apiserver-test")
            .tempdir()
            .unwrap();
        let mut s = Server {
            child: None,
            dir,
            port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_keelson-apiserver"))
            .args([
                "--data-dir",
                self.dir.path().to_str().unwrap(),
                "--bind-address",
                "127.0.0.1",
            ])
            .args(["--secure-port", &self.port.to_string()])
            .args(&self.extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start keelson-apiserver");
        self.child = Some(child);
        self.wait_ready();
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let out = Command::new("curl")
                .args([
                    "-sfk",
                    "-m",
                    "1",
                    &format!("https://127.0.0.1:{}/readyz", self.port),
                ])
                .output()
                .expect("curl is needed by the API server tests (apt-get install curl)");
            if out.status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("apiserver not ready; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("admin.token"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// kill -9, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc_kill(c.id() as i32, 15) };
            let status = c.wait().unwrap();
            assert!(
                status.success(),
                "apiserver did not exit cleanly on SIGTERM: {status:?}"
            );
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    pub fn restart_with(&mut self, extra: &[&str]) {
        self.stop();
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        self.spawn();
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::null())
            .output()
            .expect("kubectl (v1.32) must be installed on this machine")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// kubectl with a manifest on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// An HTTP request with curl: (status code, body).
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (u16, String) {
        let mut cmd = Command::new("curl");
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
        // curl would otherwise label a body as a form.
        let ct = content_type.or(body.map(|_| "application/json"));
        if let Some(ct) = ct {
            cmd.args(["-H", &format!("Content-Type: {ct}")]);
        }
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        let out = cmd.output().unwrap();
        if !out.status.success() {
            eprintln!(
                "curl {method} {path}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    pub fn curl_admin(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String) {
        self.curl(method, path, content_type, body, Some(&self.token()))
    }

    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(cfg).unwrap()
    }

    /// A metric's value from /metrics (0 when absent).
    pub fn metric(&self, name_and_labels: &str) -> f64 {
        let (_, text) = self.curl("GET", "/metrics", None, None, None);
        text.lines()
            .filter(|l| l.starts_with(name_and_labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Polls until `f` holds, or panics with `what`.
pub fn eventually(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
