//! Real processes for the ingress tests: a keelson-apiserver, the keelson-ingress binary (which
//! starts nginx), and small HTTP backends on 127.0.0.x that say who they are. Every process is a
//! guard that is stopped by PID on drop, also when a test panics.
#![allow(dead_code)]

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub const DEADLINE: Duration = Duration::from_secs(20);

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` until it returns Some, or panics with `what` and the last observation.
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + DEADLINE;
    let mut last = String::new();
    while Instant::now() < deadline {
        match f() {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}; last: {last}");
}

fn binary_beside_ours(name: &str) -> PathBuf {
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_keelson-ingress"));
    let p = ours.parent().unwrap().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build -p keelson-apiserver` first",
        p.display()
    );
    p
}

/// SIGTERM, up to 10 s for a clean exit, then SIGKILL. Returns the exit status if it exited.
fn terminate(child: &mut Child) -> Option<std::process::ExitStatus> {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

pub struct Apiserver {
    child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Apiserver {
    pub fn start() -> Apiserver {
        let dir = tempfile::Builder::new()
            .prefix("keelson-ingress-test-api")
            .tempdir()
            .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("apiserver.log")).unwrap();
        let child = Command::new(binary_beside_ours("keelson-apiserver"))
            .arg("--data-dir")
            .arg(dir.path())
            .args([
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &port.to_string(),
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start keelson-apiserver");
        let s = Apiserver { child, dir, port };
        let url = format!("https://127.0.0.1:{port}/readyz");
        eventually("apiserver /readyz", || {
            let out = Command::new("curl")
                .args(["-sfk", "-m", "1", &url])
                .output()
                .unwrap();
            if out.status.success() && s.kubeconfig().exists() {
                Ok(())
            } else {
                Err(std::fs::read_to_string(s.dir.path().join("apiserver.log")).unwrap_or_default())
            }
        });
        s
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl must be installed");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn apply(&self, yaml: &str) {
        self.kubectl_ok(&["apply", "-f", "-"], Some(yaml));
    }
}

impl Drop for Apiserver {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

pub struct Ingress {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub http_port: u16,
    pub https_port: u16,
    pub metrics_port: u16,
}

impl Ingress {
    pub fn start(api: &Apiserver) -> Ingress {
        Ingress::start_with_kubeconfig(&api.kubeconfig())
    }

    pub fn start_with_kubeconfig(kubeconfig: &Path) -> Ingress {
        let dir = tempfile::Builder::new()
            .prefix("keelson-ingress-test-nginx")
            .tempdir()
            .unwrap();
        let http_port = free_port();
        let https_port = free_port();
        let metrics_port = free_port();
        let log = std::fs::File::create(dir.path().join("ingress.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_keelson-ingress"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--http-port",
                &http_port.to_string(),
                "--bind-address",
                "127.0.0.1",
            ])
            .args(["--https-port", &https_port.to_string()])
            .arg("--conf-dir")
            .arg(dir.path().join("conf"))
            .args(["--publish-address", "127.0.0.1"])
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{metrics_port}"),
            ])
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start keelson-ingress");
        Ingress {
            child: Some(child),
            dir,
            http_port,
            https_port,
            metrics_port,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ingress.log")).unwrap_or_default()
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("conf")
    }

    /// GET through nginx with this Host: (status, body), or None when nothing answered.
    pub fn get(&self, host: &str, path: &str) -> Option<(u16, String)> {
        curl(&[
            "-H",
            &format!("Host: {host}"),
            &format!("http://127.0.0.1:{}{path}", self.http_port),
        ])
    }

    pub fn metrics(&self) -> String {
        curl(&[&format!("http://127.0.0.1:{}/metrics", self.metrics_port)])
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// SIGTERM; the controller must exit 0 and take nginx with it.
    pub fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        let status = terminate(&mut child);
        assert!(
            status.is_some_and(|s| s.success()),
            "keelson-ingress did not exit 0 on SIGTERM ({status:?}); log:\n{}",
            self.log()
        );
        assert!(
            !pid_alive(&self.conf_dir().join("nginx.pid")),
            "nginx still runs after the controller stopped"
        );
    }
}

fn pid_alive(pid_file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    let Ok(pid) = text.trim().parse::<i32>() else {
        return false;
    };
    kill(Pid::from_raw(pid), None).is_ok()
}

impl Drop for Ingress {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c);
        }
    }
}

pub fn curl(args: &[&str]) -> Option<(u16, String)> {
    let out = Command::new("curl")
        .args(["-s", "-m", "5", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl must be installed");
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n')?;
    Some((code.parse().ok()?, body.to_string()))
}

/// HTTP servers on 127.0.0.x, all on one port (an EndpointSlice has one port per name), each
/// answering `backend=<name> host=<Host header>`. Dropping the runtime stops them.
pub struct Backends {
    _runtime: tokio::runtime::Runtime,
    pub port: u16,
}

impl Backends {
    /// One backend per name, on 127.0.0.2, 127.0.0.3, ...
    pub fn start(names: &[&str]) -> Backends {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        for _ in 0..20 {
            let port = free_port();
            let listeners: Result<Vec<_>, _> = (0..names.len())
                .map(|i| TcpListener::bind(SocketAddr::from((Backends::ip(i), port))))
                .collect();
            let Ok(listeners) = listeners else { continue };
            for (l, name) in listeners.into_iter().zip(names) {
                l.set_nonblocking(true).unwrap();
                let name = name.to_string();
                runtime.spawn(async move {
                    let l = tokio::net::TcpListener::from_std(l).unwrap();
                    let app =
                        axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
                            let name = name.clone();
                            async move {
                                let host = headers
                                    .get("host")
                                    .and_then(|h| h.to_str().ok())
                                    .unwrap_or("")
                                    .to_string();
                                format!("backend={name} host={host}")
                            }
                        });
                    let _ = axum::serve(l, app).await;
                });
            }
            return Backends {
                _runtime: runtime,
                port,
            };
        }
        panic!("no port free on all of 127.0.0.2..");
    }

    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(127, 0, 0, 2 + i as u8)
    }
}
