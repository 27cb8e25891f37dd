//! `/exec`, `/attach` and `/portForward` on port 10250, what the API server's pods/exec,
//! pods/attach and pods/portforward connect to: the agent asks the runtime (CRI Exec, Attach,
//! PortForward) for a URL on its streaming server and connects the client to it. SPDY clients
//! are relayed byte for byte; WebSocket clients are translated (exec/attach, `bridge`) or
//! unwrapped (port-forward, `tunnel`), since the runtime speaks SPDY.

pub mod bridge;
pub mod runtime;
pub mod spdy;
pub mod tunnel;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Extension;
use axum::Router;
use http::{header, HeaderValue, StatusCode};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use keelson_proto::runtime::v1 as cri;
use keelson_proto::RuntimeServiceClient;
use tonic::transport::Channel;

use crate::cri::labels;
use crate::pod::context::Context;
use bridge::Streams;
use runtime::{RuntimeStream, PROTOCOL_VERSION};

/// What the streaming endpoints need: the pods, the runtime, and how long an idle stream lives
/// (--streaming-connection-idle-timeout).
pub struct Streaming {
    pub ctx: Arc<Context>,
    pub runtime: RuntimeServiceClient<Channel>,
    pub idle_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum StreamingError {
    #[error("pod \"{1}\" not found in namespace \"{0}\" on this node")]
    PodNotFound(String, String),
    #[error("container \"{0}\" is not running in pod \"{1}\"")]
    NotRunning(String, String),
    #[error("pod \"{0}\" has no ready sandbox on this node")]
    NoSandbox(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("the container runtime: {0}")]
    Runtime(String),
    #[error("the runtime's streaming server refused the stream ({0}): {1}")]
    Refused(StatusCode, String),
}

impl From<tonic::Status> for StreamingError {
    fn from(status: tonic::Status) -> Self {
        StreamingError::Runtime(status.message().to_string())
    }
}

impl IntoResponse for StreamingError {
    fn into_response(self) -> Response {
        let code = match &self {
            StreamingError::PodNotFound(..) => StatusCode::NOT_FOUND,
            StreamingError::NotRunning(..)
            | StreamingError::NoSandbox(_)
            | StreamingError::BadRequest(_) => StatusCode::BAD_REQUEST,
            StreamingError::Runtime(_) => StatusCode::INTERNAL_SERVER_ERROR,
            StreamingError::Refused(code, _) => *code,
        };
        (code, format!("{self}\n")).into_response()
    }
}

pub fn routes(s: Arc<Streaming>) -> Router {
    Router::new()
        .route(
            "/exec/{namespace}/{pod}/{container}",
            in_container_as(Stream::Exec),
        )
        .route(
            "/attach/{namespace}/{pod}/{container}",
            in_container_as(Stream::Attach),
        )
        .route(
            "/portForward/{namespace}/{pod}",
            get(port_forward).post(port_forward),
        )
        .with_state(s)
}

/// How the client asked to upgrade its connection.
enum Upgrade {
    WebSocket(WebSocketUpgrade),
    /// SPDY/3.1, with the protocol versions offered in X-Stream-Protocol-Version.
    Spdy(OnUpgrade, Vec<HeaderValue>),
}

async fn upgrade_of(req: Request) -> Result<Upgrade, StreamingError> {
    let (mut parts, _) = req.into_parts();
    let asked = parts
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if asked == "websocket" {
        return WebSocketUpgrade::from_request_parts(&mut parts, &())
            .await
            .map(Upgrade::WebSocket)
            .map_err(|e| StreamingError::BadRequest(e.body_text()));
    }
    if asked.starts_with("spdy/3.1") {
        let on = parts.extensions.remove::<OnUpgrade>().ok_or_else(|| {
            StreamingError::BadRequest("this connection cannot be upgraded".into())
        })?;
        let offered = parts.headers.get_all(PROTOCOL_VERSION).iter().cloned();
        return Ok(Upgrade::Spdy(on, offered.collect()));
    }
    Err(StreamingError::BadRequest(
        "Upgrade request required (SPDY/3.1 or websocket)".into(),
    ))
}

fn flag(q: &[(String, String)], names: &[&str]) -> bool {
    q.iter()
        .any(|(k, v)| names.contains(&k.as_str()) && (v == "true" || v == "1"))
}

/// The streams asked for, by kubectl's names (stdin, ...) or the kubelet's (input, ...).
fn streams(q: &[(String, String)]) -> Streams {
    let tty = flag(q, &["tty"]);
    Streams {
        stdin: flag(q, &["stdin", "input"]),
        stdout: flag(q, &["stdout", "output"]),
        // A terminal merges stderr into stdout (upstream drops stderr with tty).
        stderr: flag(q, &["stderr", "error"]) && !tty,
        tty,
    }
}

/// What a client streams with in a container.
#[derive(Clone, Copy)]
enum Stream {
    /// A new process: the `command` query parameters.
    Exec,
    /// The container's own process.
    Attach,
}

/// GET and POST of `in_container` for `stream`.
fn in_container_as(stream: Stream) -> MethodRouter<Arc<Streaming>> {
    get(in_container)
        .post(in_container)
        .layer(Extension(stream))
}

/// exec or attach in the container (namespace, pod, container): the runtime's streaming URL,
/// relayed over the client's upgraded connection.
async fn in_container(
    State(s): State<Arc<Streaming>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    Extension(stream): Extension<Stream>,
    req: Request,
) -> Result<Response, StreamingError> {
    let upgrade = upgrade_of(req).await?;
    let cmd: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if matches!(stream, Stream::Exec) && cmd.is_empty() {
        return Err(StreamingError::BadRequest(
            "you must specify at least 1 command".into(),
        ));
    }
    let io = streams(&q);
    let container_id = s.container_id(&namespace, &pod, &container).await?;
    let (tty, stdin, stdout, stderr) = (io.tty, io.stdin, io.stdout, io.stderr);
    let mut runtime = s.runtime.clone();
    let response = match stream {
        Stream::Exec => {
            let request = cri::ExecRequest {
                container_id,
                cmd,
                tty,
                stdin,
                stdout,
                stderr,
            };
            runtime.exec(request).await?.into_inner().url
        }
        Stream::Attach => {
            let request = cri::AttachRequest {
                container_id,
                stdin,
                tty,
                stdout,
                stderr,
            };
            runtime.attach(request).await?.into_inner().url
        }
    };
    remote_command(&s, upgrade, &response, io).await
}

async fn port_forward(
    State(s): State<Arc<Streaming>>,
    Path((namespace, pod)): Path<(String, String)>,
    req: Request,
) -> Result<Response, StreamingError> {
    let upgrade = upgrade_of(req).await?;
    let pod_sandbox_id = s.sandbox_id(&namespace, &pod).await?;
    let request = cri::PortForwardRequest {
        pod_sandbox_id,
        port: Vec::new(),
    };
    let url = s
        .runtime
        .clone()
        .port_forward(request)
        .await?
        .into_inner()
        .url;
    let idle = s.idle_timeout;
    match upgrade {
        Upgrade::WebSocket(ws) => {
            let ws = ws.protocols([tunnel::PORT_FORWARD_TUNNEL]);
            if ws.selected_protocol().is_none() {
                return Err(StreamingError::BadRequest(format!(
                    "port-forward over WebSocket needs the {} subprotocol",
                    tunnel::PORT_FORWARD_TUNNEL
                )));
            }
            let offered = [HeaderValue::from_static(tunnel::PORT_FORWARD)];
            let rt = runtime::upgrade(&url, &offered).await?;
            tracing::info!(%namespace, %pod, "port-forward over WebSocket");
            Ok(ws.on_upgrade(move |socket| tunnel::websocket(socket, rt, idle)))
        }
        Upgrade::Spdy(on, offered) => {
            let relayed = spdy_relay(&url, on, &offered, idle).await?;
            tracing::info!(%namespace, %pod, "port-forward over SPDY");
            Ok(relayed)
        }
    }
}

/// Exec and attach: WebSocket clients through `bridge`, SPDY ones relayed.
async fn remote_command(
    s: &Streaming,
    upgrade: Upgrade,
    url: &str,
    io: Streams,
) -> Result<Response, StreamingError> {
    let idle = s.idle_timeout;
    match upgrade {
        Upgrade::WebSocket(ws) => {
            let ws = ws.protocols([bridge::V5, bridge::V4]);
            let v5 = match ws.selected_protocol().and_then(|p| p.to_str().ok()) {
                Some(bridge::V5) => true,
                Some(_) => false,
                None => {
                    return Err(StreamingError::BadRequest(format!(
                        "exec and attach over WebSocket need the {} or {} subprotocol",
                        bridge::V5,
                        bridge::V4
                    )))
                }
            };
            let rt = runtime::upgrade(url, &[HeaderValue::from_static(bridge::V4)]).await?;
            Ok(ws.on_upgrade(move |socket| bridge::run(socket, rt, io, v5, idle)))
        }
        Upgrade::Spdy(on, offered) => spdy_relay(url, on, &offered, idle).await,
    }
}

/// Upgrades to the runtime with the client's protocol versions, answers the client with the
/// runtime's choice, then relays bytes.
async fn spdy_relay(
    url: &str,
    on: OnUpgrade,
    offered: &[HeaderValue],
    idle: Duration,
) -> Result<Response, StreamingError> {
    let RuntimeStream { io, headers } = runtime::upgrade(url, offered).await?;
    let mut resp = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1");
    if let Some(chosen) = headers.get(PROTOCOL_VERSION) {
        resp = resp.header(PROTOCOL_VERSION, chosen);
    }
    tokio::spawn(async move {
        match on.await {
            Ok(client) => tunnel::relay(TokioIo::new(client), io, idle).await,
            Err(e) => tracing::debug!(error = %e, "the client's SPDY upgrade failed"),
        }
    });
    resp.body(axum::body::Body::empty())
        .map_err(|e| StreamingError::Runtime(e.to_string()))
}

impl Streaming {
    fn pod_uid(&self, namespace: &str, pod: &str) -> Result<String, StreamingError> {
        self.ctx
            .find(namespace, pod)
            .and_then(|p| p.metadata.uid.clone())
            .ok_or_else(|| StreamingError::PodNotFound(namespace.into(), pod.into()))
    }

    /// The running container's runtime ID (its newest attempt).
    async fn container_id(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, StreamingError> {
        let uid = self.pod_uid(namespace, pod)?;
        let selector = HashMap::from([
            (labels::POD_UID.to_string(), uid),
            (labels::CONTAINER_NAME.to_string(), container.to_string()),
        ]);
        let list = self
            .ctx
            .cri
            .list_containers(selector)
            .await
            .map_err(|e| StreamingError::Runtime(e.to_string()))?;
        list.into_iter()
            .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
            .max_by_key(|c| c.metadata.as_ref().map_or(0, |m| m.attempt))
            .map(|c| c.id)
            .ok_or_else(|| StreamingError::NotRunning(container.into(), pod.into()))
    }

    /// The pod's ready sandbox (port-forward connects inside its network namespace).
    async fn sandbox_id(&self, namespace: &str, pod: &str) -> Result<String, StreamingError> {
        let uid = self.pod_uid(namespace, pod)?;
        let selector = HashMap::from([(labels::POD_UID.to_string(), uid)]);
        let list = self
            .ctx
            .cri
            .list_pod_sandbox(selector)
            .await
            .map_err(|e| StreamingError::Runtime(e.to_string()))?;
        list.into_iter()
            .filter(|s| s.state == cri::PodSandboxState::SandboxReady as i32)
            .max_by_key(|s| s.created_at)
            .map(|s| s.id)
            .ok_or_else(|| StreamingError::NoSandbox(pod.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn streams_read_kubectls_and_the_kubelets_names() {
        let s = streams(&q(&[
            ("stdin", "true"),
            ("stdout", "true"),
            ("stderr", "true"),
        ]));
        assert_eq!(
            s,
            Streams {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false
            }
        );
        let s = streams(&q(&[("input", "1"), ("output", "1"), ("error", "1")]));
        assert!(s.stdin && s.stdout && s.stderr);
        let s = streams(&q(&[
            ("stdout", "true"),
            ("stderr", "true"),
            ("tty", "true"),
        ]));
        assert!(s.tty && s.stdout && !s.stderr, "a terminal has no stderr");
        assert_eq!(streams(&q(&[("stdin", "false")])), Streams::default());
    }
}
