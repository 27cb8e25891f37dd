//! Startup, liveness and readiness probes (httpGet, tcpSocket, exec via CRI ExecSync, grpc), one
//! task per probed container. Results go to a shared table the pod worker reads; a change pokes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, HTTPHeader, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::status::ProbeView;
use crate::cri::Cri;

mod grpc;

/// Probe outcomes for the containers of one pod.
#[derive(Clone, Debug, Default)]
pub struct ProbeTable {
    pub view: ProbeView,
    /// Containers whose liveness or startup probe failed past its threshold.
    pub unhealthy: Vec<String>,
    /// The latest failure of each probe, by container id and kind (for events).
    pub last_failure: HashMap<(String, &'static str), String>,
}

pub type SharedProbes = Arc<Mutex<ProbeTable>>;

/// Why a probe failed; the text is what events and logs show.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("invalid port {0}")]
    InvalidPort(i32),
    #[error("container {container} has no port named {port}")]
    NoSuchPort { container: String, port: String },
    #[error("dial {addr}: {source}")]
    HttpConnect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    HttpIo(#[source] std::io::Error),
    #[error("malformed HTTP answer from {0}")]
    MalformedAnswer(String),
    #[error("http probe to {0} timed out")]
    HttpTimeout(String),
    #[error("HTTP probe failed with statuscode: {0}")]
    HttpStatus(u16),
    #[error("dial tcp {addr}: {source}")]
    TcpConnect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("dial tcp {0}: timeout")]
    TcpTimeout(String),
    #[error(transparent)]
    Exec(#[from] crate::cri::CriError),
    #[error("command exited with {code}: {stdout}")]
    ExitCode { code: i32, stdout: String },
    #[error("probe has no handler the agent supports (httpGet, tcpSocket, exec, grpc)")]
    NoHandler,
    #[error(transparent)]
    Grpc(#[from] grpc::GrpcFailure),
    #[error("httpGet {field} {value:?} has control characters; not sent")]
    ControlCharacters { field: &'static str, value: String },
    #[error("httpGet header name {0:?} is not an HTTP token; not sent")]
    HeaderName(String),
    #[error("httpGet scheme {0:?} is neither HTTP nor HTTPS")]
    Scheme(String),
    #[error("TLS with {addr}: {message}")]
    Tls { addr: String, message: String },
}

/// Where an httpGet handler (of a probe or a lifecycle hook) sends its request, resolved against
/// its container (named ports) and pod (the address when `host` is empty).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpTarget {
    pub host: String,
    pub port: u16,
    pub path: String,
    pub headers: Vec<HTTPHeader>,
    /// HTTPS (the certificate is not verified, as the kubelet's).
    pub tls: bool,
}

impl HttpTarget {
    pub fn of(
        http: &HTTPGetAction,
        container: &Container,
        pod_ip: &str,
    ) -> Result<HttpTarget, ProbeError> {
        let tls = match http.scheme.as_deref() {
            None | Some("HTTP") => false,
            Some("HTTPS") => true,
            Some(other) => return Err(ProbeError::Scheme(other.to_string())),
        };
        Ok(HttpTarget {
            host: http
                .host
                .clone()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| pod_ip.to_string()),
            port: resolve_port(&http.port, container)?,
            path: http.path.clone().unwrap_or_else(|| "/".into()),
            headers: http.http_headers.clone().unwrap_or_default(),
            tls,
        })
    }
}

/// Runs one probe once. Errors count as failures; the error says why (for events and logs).
pub async fn probe_once(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    container_id: &str,
    cri: &dyn Cri,
) -> Result<(), ProbeError> {
    let timeout =
        Duration::from_secs(u64::try_from(probe.timeout_seconds.unwrap_or(1).max(1)).unwrap_or(1));
    let host_or_pod = |host: &Option<String>| {
        host.clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| pod_ip.to_string())
    };
    if let Some(http) = &probe.http_get {
        let target = HttpTarget::of(http, container, pod_ip)?;
        return http_probe(&target, timeout).await;
    }
    if let Some(tcp) = &probe.tcp_socket {
        let port = resolve_port(&tcp.port, container)?;
        let host = host_or_pod(&tcp.host);
        let addr = format!("{host}:{port}");
        return match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(source)) => Err(ProbeError::TcpConnect { addr, source }),
            Err(_) => Err(ProbeError::TcpTimeout(addr)),
        };
    }
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let secs = i64::try_from(timeout.as_secs()).unwrap_or(1);
        let resp = cri.exec_sync(container_id, cmd, secs).await?;
        return if resp.exit_code == 0 {
            Ok(())
        } else {
            Err(ProbeError::ExitCode {
                code: resp.exit_code,
                stdout: String::from_utf8_lossy(&resp.stdout).into_owned(),
            })
        };
    }
    if let Some(action) = &probe.grpc {
        let port = u16::try_from(action.port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or(ProbeError::InvalidPort(action.port))?;
        let service = action.service.as_deref().unwrap_or("");
        return Ok(grpc::check(pod_ip, port, service, timeout).await?);
    }
    Err(ProbeError::NoHandler)
}

/// An HTTP GET that succeeds with a 2xx or 3xx answer within `timeout`.
async fn http_probe(target: &HttpTarget, timeout: Duration) -> Result<(), ProbeError> {
    let code = tokio::time::timeout(timeout, http_get(target))
        .await
        .map_err(|_| {
            let HttpTarget {
                host, port, path, ..
            } = target;
            ProbeError::HttpTimeout(format!("{host}:{port}{path}"))
        })??;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(ProbeError::HttpStatus(code))
    }
}

fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, ProbeError> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).map_err(|_| ProbeError::InvalidPort(*p)),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .or_else(|| name.parse().ok())
            .ok_or_else(|| ProbeError::NoSuchPort {
                container: container.name.clone(),
                port: name.clone(),
            }),
    }
}

/// A minimal HTTP/1.1 GET: the status code of the answer.
pub async fn http_get(target: &HttpTarget) -> Result<u16, ProbeError> {
    // Checked before connecting: a probe must never carry a second request or extra headers
    // from the pod spec into the host's network namespace.
    let request = http_request(target)?;
    let (host, port) = (target.host.as_str(), target.port);
    let stream =
        TcpStream::connect((host, port))
            .await
            .map_err(|source| ProbeError::HttpConnect {
                addr: format!("{host}:{port}"),
                source,
            })?;
    let code = if target.tls {
        let stream = super::probe_tls::connect(host, stream)
            .await
            .map_err(|message| ProbeError::Tls {
                addr: format!("{host}:{port}"),
                message,
            })?;
        status_code(stream, &request).await?
    } else {
        status_code(stream, &request).await?
    };
    code.ok_or_else(|| ProbeError::MalformedAnswer(format!("{host}:{port}")))
}

/// Sends the request and reads the status code of the answer (None if it is not HTTP).
async fn status_code<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> Result<Option<u16>, ProbeError> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(ProbeError::HttpIo)?;
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        let Some(free) = head.get_mut(read..) else {
            break;
        };
        let n = stream.read(free).await.map_err(ProbeError::HttpIo)?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let text = String::from_utf8_lossy(head.get(..read).unwrap_or(&head));
    Ok(text.split_whitespace().nth(1).and_then(|c| c.parse().ok()))
}

/// The request bytes of a probe. Control characters (CR and LF above all) are refused; a space
/// or non-ASCII byte in the path is percent-encoded, as the kubelet's URL building does. The
/// spec's headers are sent as given; a Host, User-Agent or Accept among them replaces the
/// default one, as the kubelet's request building does.
pub fn http_request(target: &HttpTarget) -> Result<String, ProbeError> {
    let (host, port, path) = (target.host.as_str(), target.port, target.path.as_str());
    let control = |field: &'static str, value: &str| {
        if value.chars().any(char::is_control) {
            Err(ProbeError::ControlCharacters {
                field,
                value: value.to_string(),
            })
        } else {
            Ok(())
        }
    };
    control("path", path)?;
    control("host", host)?;
    if host.contains(char::is_whitespace) {
        return Err(ProbeError::ControlCharacters {
            field: "host",
            value: host.to_string(),
        });
    }
    let mut target_path = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        target_path.push('/');
    }
    for b in path.bytes() {
        if b == b' ' || !b.is_ascii() {
            target_path.push_str(&format!("%{b:02X}"));
        } else {
            target_path.push(char::from(b));
        }
    }
    let mut request = format!("GET {target_path} HTTP/1.1\r\n");
    let given = |name: &str| {
        target
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case(name))
    };
    for (name, value) in [
        ("Host", format!("{host}:{port}")),
        ("User-Agent", "keelson-probe/1.0".to_string()),
        ("Accept", "*/*".to_string()),
    ] {
        if !given(name) {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    for h in &target.headers {
        header(&h.name, &h.value)?;
        request.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    request.push_str("Connection: close\r\n\r\n");
    Ok(request)
}

/// Refuses a header whose name is not an HTTP token or whose value has control characters
/// (a tab is allowed, as in HTTP).
fn header(name: &str, value: &str) -> Result<(), ProbeError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(ProbeError::HeaderName(name.to_string()));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(ProbeError::ControlCharacters {
            field: "header",
            value: value.to_string(),
        });
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }
}

/// The container a probe checks: its spec (for named ports), its runtime id and the pod's address.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    pub container: Container,
    pub id: String,
    pub pod_ip: String,
}

/// Where probe results go: the pod's table, and a poke to its worker when the table changes.
#[derive(Clone, Debug)]
pub struct ResultSink {
    pub table: SharedProbes,
    pub poke: mpsc::Sender<()>,
}

/// Probes one container until it is aborted (the worker aborts it when the container stops).
pub async fn run(
    kind: Kind,
    probe: Probe,
    target: ProbeTarget,
    cri: Arc<dyn Cri>,
    sink: ResultSink,
) {
    let period =
        Duration::from_secs(u64::try_from(probe.period_seconds.unwrap_or(10).max(1)).unwrap_or(10));
    let initial = Duration::from_secs(
        u64::try_from(probe.initial_delay_seconds.unwrap_or(0).max(0)).unwrap_or(0),
    );
    let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
    let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
    tokio::time::sleep(initial).await;
    let (mut successes, mut failures) = (0i32, 0i32);
    loop {
        // Liveness and readiness wait for the startup probe to succeed.
        if kind == Kind::Startup || started(&sink.table, &target.id) {
            let result = probe_once(
                &probe,
                &target.container,
                &target.pod_ip,
                &target.id,
                cri.as_ref(),
            )
            .await;
            match &result {
                Ok(()) => {
                    successes = successes.saturating_add(1);
                    failures = 0;
                }
                Err(why) => {
                    failures = failures.saturating_add(1);
                    successes = 0;
                    tracing::debug!(container = %target.container.name, ?kind, %why, "probe failed");
                    if let Ok(mut t) = sink.table.lock() {
                        t.last_failure
                            .insert((target.id.clone(), kind.name()), why.to_string());
                    }
                }
            }
            let changed = record(
                kind,
                &target.id,
                successes >= success_threshold,
                failures >= failure_threshold,
                &sink.table,
            );
            if changed {
                let _ = sink.poke.try_send(());
            }
            if kind == Kind::Startup && successes >= success_threshold {
                return;
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// Whether the container's startup probe succeeded (true when it has none).
fn started(table: &SharedProbes, id: &str) -> bool {
    table
        .lock()
        .map(|t| t.view.started.get(id).copied())
        .ok()
        .flatten()
        .unwrap_or(true)
}

/// Applies thresholds; returns whether the table changed.
fn record(kind: Kind, id: &str, passed: bool, failed: bool, table: &SharedProbes) -> bool {
    let Ok(mut t) = table.lock() else {
        return false;
    };
    match kind {
        Kind::Readiness => {
            let previous = t.view.ready.get(id).copied();
            let now = if passed {
                true
            } else if failed {
                false
            } else {
                previous.unwrap_or(false)
            };
            t.view.ready.insert(id.to_string(), now);
            previous != Some(now)
        }
        Kind::Startup => {
            if passed {
                t.view.started.insert(id.to_string(), true);
                true
            } else if failed && !t.unhealthy.iter().any(|u| u == id) {
                t.unhealthy.push(id.to_string());
                true
            } else {
                false
            }
        }
        Kind::Liveness => {
            if failed && !t.unhealthy.iter().any(|u| u == id) {
                t.unhealthy.push(id.to_string());
                true
            } else {
                false
            }
        }
    }
}

/// Probe tasks by container id.
#[derive(Default)]
pub struct Probers {
    tasks: HashMap<String, Vec<tokio::task::JoinHandle<()>>>,
}

impl Probers {
    /// Starts the container's probes if not running yet. The startup probe (if any) gates the rest.
    pub fn ensure(&mut self, target: &ProbeTarget, cri: &Arc<dyn Cri>, sink: &ResultSink) {
        if self.tasks.contains_key(&target.id) {
            return;
        }
        let container = &target.container;
        if let Ok(mut t) = sink.table.lock() {
            if container.startup_probe.is_some() {
                t.view.started.entry(target.id.clone()).or_insert(false);
            }
        }
        let mut handles = Vec::new();
        for (kind, probe) in [
            (Kind::Startup, &container.startup_probe),
            (Kind::Liveness, &container.liveness_probe),
            (Kind::Readiness, &container.readiness_probe),
        ] {
            if let Some(probe) = probe.clone() {
                handles.push(tokio::spawn(run(
                    kind,
                    probe,
                    target.clone(),
                    cri.clone(),
                    sink.clone(),
                )));
            }
        }
        self.tasks.insert(target.id.clone(), handles);
    }

    /// Stops the probes of containers that are no longer running.
    pub fn retain(&mut self, running: &[String], table: &SharedProbes) {
        let gone: Vec<String> = self
            .tasks
            .keys()
            .filter(|id| !running.contains(id))
            .cloned()
            .collect();
        for id in gone {
            for h in self.tasks.remove(&id).into_iter().flatten() {
                h.abort();
            }
            if let Ok(mut t) = table.lock() {
                t.view.ready.remove(&id);
                t.view.started.remove(&id);
                t.unhealthy.retain(|u| *u != id);
            }
        }
    }

    pub fn stop_all(&mut self) {
        for (_, handles) in self.tasks.drain() {
            for h in handles {
                h.abort();
            }
        }
    }
}

impl Drop for Probers {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, port: u16, path: &str) -> HttpTarget {
        HttpTarget {
            host: host.into(),
            port,
            path: path.into(),
            headers: vec![],
            tls: false,
        }
    }

    #[test]
    fn the_request_line_takes_the_path_as_one_token() {
        let r = http_request(&at("10.0.0.5", 8080, "/healthz?x=1")).unwrap();
        assert!(r.starts_with("GET /healthz?x=1 HTTP/1.1\r\nHost: 10.0.0.5:8080\r\n"));
        let r = http_request(&at("10.0.0.5", 80, "ready now/é")).unwrap();
        assert!(r.starts_with("GET /ready%20now/%C3%A9 HTTP/1.1\r\n"), "{r}");
    }

    #[test]
    fn control_characters_are_refused() {
        for path in [
            "/ HTTP/1.1\r\nHost: x\r\n\r\nGET /admin",
            "/a\nb",
            "/\0",
            "/\x7f",
            "/\t",
        ] {
            assert!(
                matches!(
                    http_request(&at("10.0.0.5", 80, path)),
                    Err(ProbeError::ControlCharacters { field: "path", .. })
                ),
                "{path:?}"
            );
        }
        for host in ["10.0.0.5\r\nX-Injected: 1", "a b"] {
            assert!(http_request(&at(host, 80, "/")).is_err(), "{host:?}");
        }
    }

    #[test]
    fn spec_headers_are_sent_and_replace_the_defaults() {
        let header = |name: &str, value: &str| HTTPHeader {
            name: name.into(),
            value: value.into(),
        };
        let mut t = at("10.0.0.5", 80, "/");
        t.headers = vec![header("Host", "example.test"), header("X-Drain", "1")];
        let r = http_request(&t).unwrap();
        assert!(r.contains("\r\nHost: example.test\r\n"), "{r}");
        assert!(!r.contains("10.0.0.5"), "{r}");
        assert!(r.contains("\r\nX-Drain: 1\r\n"), "{r}");
        assert!(r.contains("\r\nUser-Agent: keelson-probe/1.0\r\n"), "{r}");
        for (name, value) in [("X\r\nEvil", "1"), ("X-A", "1\r\nEvil: 2"), ("", "1")] {
            t.headers = vec![header(name, value)];
            assert!(http_request(&t).is_err(), "{name:?}: {value:?}");
        }
    }

    /// HTTPS against a self-signed certificate: answered, as the kubelet's probe would be.
    #[tokio::test]
    async fn https_is_spoken_whatever_the_certificate() {
        let names = ["127.0.0.1".to_string()];
        let config = crate::server::tls::server_config(None, None, &names, None).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = tls.read(&mut buf).await.unwrap();
            tls.write_all(b"HTTP/1.1 201 Created\r\n\r\n")
                .await
                .unwrap();
            tls.shutdown().await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let mut target = at("127.0.0.1", port, "/secure");
        target.tls = true;
        assert_eq!(http_get(&target).await.unwrap(), 201);
        assert!(server
            .await
            .unwrap()
            .starts_with("GET /secure HTTP/1.1\r\n"));
    }

    /// A real listener: the refused probe fails and nothing reaches the socket.
    #[tokio::test]
    async fn a_refused_probe_sends_nothing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let err = http_get(&at(
            "127.0.0.1",
            port,
            "/x HTTP/1.1\r\nHost: evil\r\n\r\nGET /y",
        ))
        .await
        .unwrap_err();
        assert!(err.to_string().contains("control characters"), "{err}");
        // A good probe afterwards is the first connection the listener sees.
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = conn.read(&mut buf).await.unwrap();
            conn.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        assert_eq!(http_get(&at("127.0.0.1", port, "/ok")).await.unwrap(), 204);
        let seen = server.await.unwrap();
        assert!(seen.starts_with("GET /ok HTTP/1.1\r\n"), "{seen}");
    }
}
