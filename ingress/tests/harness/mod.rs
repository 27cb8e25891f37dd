//! What only the ingress tests need, on keelson-testing: a test host (a network namespace with no
//! default route) holding the API server, keelson-ingress (which starts nginx) and small HTTP
//! backends that say who they are, on private addresses of the host (the API server refuses
//! endpoints on loopback); curl through nginx from inside the host.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use keelson_testing::hosts::command_in;
use keelson_testing::{require_root_and_tools, Apiserver, ChildGuard, Component, TestHost};
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// How long a test waits for the controller and nginx to catch up.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The API server's address in the test host; backends follow it (10.250.0.2, ...).
const API_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);

/// One test's cluster: the API server and the backends in their own test host. Fields drop in
/// order, the host last.
pub struct World {
    pub backends: Backends,
    pub api: Apiserver,
    pub host: TestHost,
}

impl World {
    /// A test host with one backend per name, and an API server in it.
    pub fn start(names: &[&str]) -> World {
        require_root_and_tools(&["nginx", "curl", "kubectl", "ip", "nsenter"]);
        let host = TestHost::create("ingress");
        // On the host's own lo: this kernel may lack the dummy link type, and nothing routes
        // these addresses out of the namespace either way.
        for ip in std::iter::once(API_ADDRESS).chain((0..names.len()).map(Backends::ip)) {
            host.ip(&["addr", "add", &format!("{ip}/32"), "dev", "lo"]);
        }
        let backends = Backends::start(&host, names);
        let api = Apiserver::start_in(&host, &API_ADDRESS.to_string(), &[]);
        World {
            backends,
            api,
            host,
        }
    }

    /// keelson-ingress in this world's host, as keelson:ingress-controller.
    pub fn ingress(&self) -> Ingress {
        Ingress::start(&self.host, &self.api.kubeconfig_of(Component::Ingress))
    }
}

pub struct Ingress {
    child: ChildGuard,
    netns: PathBuf,
    pub dir: tempfile::TempDir,
    pub http_port: u16,
    pub https_port: u16,
    pub metrics_port: u16,
}

impl Ingress {
    /// In `host` (a namespace of its own: fixed ports are free), on its 127.0.0.1.
    pub fn start(host: &TestHost, kubeconfig: &Path) -> Ingress {
        Ingress::replica(host, kubeconfig, 0, "127.0.0.1", &[])
    }

    /// Replica `n` of several in one host: ports moved up by `n`, status.loadBalancer naming
    /// `publish`, and `extra` flags.
    pub fn replica(
        host: &TestHost,
        kubeconfig: &Path,
        n: u16,
        publish: &str,
        extra: &[&str],
    ) -> Ingress {
        let dir = tempfile::Builder::new()
            .prefix("keelson-ingress-test-nginx")
            .tempdir()
            .unwrap();
        let [http_port, https_port, metrics_port] = [8080 + n, 8443 + n, 10254 + n];
        let mut cmd = host.command(env!("CARGO_BIN_EXE_keelson-ingress"));
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--bind-address", "127.0.0.1"])
            .args(["--http-port", &http_port.to_string()])
            .args(["--https-port", &https_port.to_string()])
            .arg("--conf-dir")
            .arg(dir.path().join("conf"))
            .args(["--publish-address", publish])
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{metrics_port}"),
            ])
            .args(extra)
            .env("RUST_LOG", "info");
        let child = ChildGuard::spawn_logged(&mut cmd, &dir.path().join("ingress.log"));
        Ingress {
            child,
            netns: host.path(),
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

    /// curl from inside the host: (status, body), or None when nothing answered.
    pub fn curl(&self, args: &[&str]) -> Option<(u16, String)> {
        curl_in(Some(&self.netns), args)
    }

    /// A command run inside the host (for what `curl` does not show).
    pub fn command(&self, program: &str) -> Command {
        command_in(Some(&self.netns), program)
    }

    /// GET through nginx with this Host: (status, body), or None when nothing answered.
    pub fn get(&self, host: &str, path: &str) -> Option<(u16, String)> {
        self.curl(&[
            "-H",
            &format!("Host: {host}"),
            &format!("http://127.0.0.1:{}{path}", self.http_port),
        ])
    }

    pub fn metrics(&self) -> String {
        self.curl(&[&format!("http://127.0.0.1:{}/metrics", self.metrics_port)])
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// SIGTERM; the controller must exit 0 and take nginx with it.
    pub fn stop(&mut self) {
        let status = self.child.terminate(Duration::from_secs(10));
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

/// curl on this machine with `args`: (HTTP status, body), or None when nothing answered.
pub fn curl(args: &[&str]) -> Option<(u16, String)> {
    curl_in(None, args)
}

/// curl with `args` in the namespace at `netns` (or here), giving up after 5 s.
fn curl_in(netns: Option<&Path>, args: &[&str]) -> Option<(u16, String)> {
    let out = command_in(netns, "curl")
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

pub struct Backends {
    _runtime: tokio::runtime::Runtime,
    pub port: u16,
}

impl Backends {
    /// One backend per name, on 10.250.0.2, 10.250.0.3, ... in `host` (addresses already there).
    fn start(host: &TestHost, names: &[&str]) -> Backends {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let port = 9000;
        let count = names.len();
        // The sockets belong to the host's namespace; any thread can serve them.
        let listeners = host.run_in(move || {
            (0..count)
                .map(|i| TcpListener::bind(SocketAddr::from((Backends::ip(i), port))).unwrap())
                .collect::<Vec<_>>()
        });
        for (l, name) in listeners.into_iter().zip(names) {
            l.set_nonblocking(true).unwrap();
            let name = name.to_string();
            runtime.spawn(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
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
        Backends {
            _runtime: runtime,
            port,
        }
    }

    pub fn ip(i: usize) -> Ipv4Addr {
        let [a, b, c, d] = API_ADDRESS.octets();
        Ipv4Addr::new(a, b, c, d + 1 + i as u8)
    }
}

/// The controller name keelson-ingress serves IngressClasses of.
pub const CONTROLLER: &str = "keelson.dev/ingress-nginx";

/// An IngressClass `name` of `controller`.
pub fn ingress_class(name: &str, controller: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: {name}}}\n\
         spec: {{controller: {controller}}}\n"
    )
}

/// A Service `name` in default with one port `http`: `port`, to `target_port` when given.
pub fn service(name: &str, port: u16, target_port: Option<u16>) -> String {
    let target = target_port.map_or(String::new(), |t| format!(", targetPort: {t}"));
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\n\
         spec: {{ports: [{{name: http, port: {port}{target}}}]}}\n"
    )
}

/// An EndpointSlice `name` of Service `service`: ready endpoints on port `http`.
pub fn slice(name: &str, service: &str, port: u16, addresses: &[String]) -> String {
    let ready: Vec<(String, &str)> = addresses
        .iter()
        .map(|a| (a.clone(), "{ready: true}"))
        .collect();
    slice_with_conditions(name, service, port, &ready)
}

/// An EndpointSlice `name` of Service `service` on port `http`: endpoints as (address,
/// conditions as YAML).
pub fn slice_with_conditions(
    name: &str,
    service: &str,
    port: u16,
    endpoints: &[(String, &str)],
) -> String {
    let eps: Vec<String> = endpoints
        .iter()
        .map(|(a, c)| format!(r#"{{addresses: ["{a}"], conditions: {c}}}"#))
        .collect();
    format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}, namespace: default, labels: {{kubernetes.io/service-name: {service}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}, protocol: TCP}}]
endpoints: [{}]
"#,
        eps.join(", ")
    )
}

/// An Ingress of `class` for one host: Prefix paths as (path, service, port as YAML).
pub fn ingress(
    name: &str,
    class: &str,
    host: &str,
    annotations: &str,
    paths: &[(&str, &str, &str)],
) -> String {
    let paths: Vec<String> = paths
        .iter()
        .map(|(path, svc, port)| {
            format!("      - {{path: {path}, pathType: Prefix, backend: {{service: {{name: {svc}, port: {port}}}}}}}")
        })
        .collect();
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: default\n  annotations: {{{annotations}}}\n\
         spec:\n  ingressClassName: {class}\n  rules:\n  - host: {host}\n    http:\n      paths:\n{}\n",
        paths.join("\n")
    )
}

/// The backend that answered, after checking it saw the Host the client sent.
pub fn backend(ing: &Ingress, host: &str, path: &str) -> Result<String, String> {
    match ing.get(host, path) {
        Some((200, body)) => {
            let (who, seen_host) = body
                .strip_prefix("backend=")
                .and_then(|b| b.split_once(" host="))
                .ok_or_else(|| format!("not a backend answer: {body}"))?;
            assert_eq!(seen_host, host, "the backend must see the client's Host");
            Ok(who.to_string())
        }
        other => Err(format!("{host}{path}: {other:?}")),
    }
}

/// Warning Events on Ingress `name` in default: (reason, message).
pub fn warnings(api: &Apiserver, name: &str) -> Vec<(String, String)> {
    let list: serde_json::Value =
        serde_json::from_str(&api.kubectl_ok(&["get", "events", "-n", "default", "-o", "json"]))
            .unwrap();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["involvedObject"]["kind"] == "Ingress"
                && e["involvedObject"]["name"] == name
                && e["type"] == "Warning"
        })
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (s("reason"), s("message"))
        })
        .collect()
}

/// Waits for a Warning Event with `reason` on Ingress `name`; its message.
pub fn expect_warning(api: &Apiserver, name: &str, reason: &str) -> String {
    keelson_testing::eventually(&format!("a {reason} Warning on {name}"), DEADLINE, || {
        let all = warnings(api, name);
        all.iter()
            .find(|(r, _)| r == reason)
            .map(|(_, m)| m.clone())
            .ok_or_else(|| format!("{all:?}"))
    })
}
