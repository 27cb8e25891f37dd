//! HTTPS on port 10250: `/containerLogs/{ns}/{pod}/{container}` (what the apiserver's pods/log
//! proxies to), `/exec`, `/attach` and `/portForward` (`streaming`), `/pods`, `/healthz`,
//! `/metrics`, `/stats/summary` and `/metrics/resource` (`stats`); all but /healthz need a user
//! the API server allows on this Node's subresources (`auth`).

pub mod auth;
pub mod logs;
pub mod stats;
pub mod streaming;
pub mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cri::labels;
use crate::pod::context::Context;
use crate::pod::translate;
use logs::LogOptions;

pub fn router(
    ctx: Arc<Context>,
    auth: Arc<auth::PortAuth>,
    streaming: Arc<streaming::Streaming>,
    stats: Arc<crate::stats::Stats>,
) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .route("/pods", get(pods))
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .with_state(ctx)
        .merge(streaming::routes(streaming))
        .merge(stats::routes(stats))
        .layer(axum::middleware::from_fn_with_state(auth, auth::require))
}

/// Connections open at once on port 10250 (KEELSON_MAX_OPEN_CONNECTIONS overrides it); its
/// clients are the API server and scrapers, so far fewer than the API server's.
pub const MAX_OPEN_CONNECTIONS: usize = 512;

/// Serves `router` over TLS until the process ends, through keelson-daemon's accept loop
/// (handshake and header timeouts, the cap, back-off on accept errors).
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    let limits = keelson_daemon::Connections::with_max_open(MAX_OPEN_CONNECTIONS).from_env();
    let forever = std::future::pending();
    keelson_daemon::serve_connections(listener, Some(TlsAcceptor::from(tls)), app, limits, forever)
        .await;
    Ok(())
}

async fn metrics(State(ctx): State<Arc<Context>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        ctx.metrics.render(),
    )
        .into_response()
}

/// The pods bound to this node, as the kubelet's /pods answers (a PodList).
async fn pods(State(ctx): State<Arc<Context>>) -> Response {
    let items: Vec<serde_json::Value> = ctx
        .pods
        .read()
        .values()
        .filter_map(|pod| serde_json::to_value(pod.as_ref()).ok())
        .collect();
    let list = serde_json::json!({ "kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items });
    (
        [(header::CONTENT_TYPE, "application/json")],
        list.to_string(),
    )
        .into_response()
}

fn options(q: &HashMap<String, String>) -> LogOptions {
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    LogOptions {
        follow: flag("follow"),
        tail_lines: q.get("tailLines").and_then(|v| v.parse().ok()),
        timestamps: flag("timestamps"),
        previous: flag("previous"),
        limit_bytes: q.get("limitBytes").and_then(|v| v.parse().ok()),
        since: q
            .get("sinceSeconds")
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|secs| {
                k8s_openapi::jiff::Timestamp::now()
                    .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                    .ok()
            })
            .or_else(|| q.get("sinceTime").and_then(|v| v.parse().ok())),
    }
}

fn is_container_of(pod: &k8s_openapi::api::core::v1::Pod, name: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let init = spec.init_containers.iter().flatten();
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| &c.name);
    spec.containers
        .iter()
        .chain(init)
        .map(|c| &c.name)
        .chain(ephemeral)
        .any(|n| n == name)
}

async fn container_logs(
    State(ctx): State<Arc<Context>>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let opts = options(&query);
    // The container name comes from the URL (decoded, so it may hold "../"); only a DNS label,
    // as every container name is, can name a log folder.
    if let Some(why) = keelson_apimachinery::validation::dns1123_label(&container).first() {
        return (
            StatusCode::BAD_REQUEST,
            format!("invalid container name \"{container}\": {why}\n"),
        )
            .into_response();
    }
    let Some(pod) = ctx.find(&namespace, &pod_name) else {
        return (
            StatusCode::NOT_FOUND,
            format!("pod \"{pod_name}\" not found in namespace \"{namespace}\" on this node\n"),
        )
            .into_response();
    };
    let dir = std::path::PathBuf::from(translate::pod_log_dir(&ctx.settings, &pod));
    // And only a container of this pod: never a path outside the pod's log folder.
    let known = is_container_of(&pod, &container);
    let file = known.then(|| logs::log_file(&dir, &container, opts.previous));
    let Some(Some(file)) = file else {
        let what = if opts.previous {
            "previous terminated container"
        } else {
            "container"
        };
        return (
            StatusCode::BAD_REQUEST,
            format!("{what} \"{container}\" in pod \"{pod_name}\" is not available\n"),
        )
            .into_response();
    };
    let (first, offset) = read_logs(&file, &opts).await;
    if !opts.follow {
        return ([(header::CONTENT_TYPE, "text/plain")], first).into_response();
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(16);
    let followed = FollowedLog {
        file,
        offset,
        timestamps: opts.timestamps,
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        container,
    };
    tokio::spawn(follow(ctx, followed, first, tx));
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    (
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The log as asked for (rotated files first, oldest first, then the current one; whole lines
/// only), and the offset in the current file where following it goes on.
async fn read_logs(file: &std::path::Path, opts: &LogOptions) -> (String, u64) {
    let mut content = String::new();
    for rotated in crate::pod::log_rotation::rotated_files(file) {
        content.push_str(
            &tokio::fs::read_to_string(&rotated)
                .await
                .unwrap_or_default(),
        );
    }
    let current = tokio::fs::read_to_string(file).await.unwrap_or_default();
    let rotated_len = content.len();
    content.push_str(&current);
    // Only whole lines: a line being written is picked up by follow.
    let complete_len = content.rfind('\n').map_or(0, |i| i + 1);
    let mut lines: Vec<&str> = content[..complete_len].lines().collect();
    if let Some(cutoff) = opts.since {
        lines = logs::since(&lines, cutoff);
    }
    let shown = match opts.tail_lines {
        Some(n) => logs::tail(&lines, n),
        None => lines,
    };
    let mut first = logs::render(&shown, opts.timestamps);
    if let Some(limit) = opts.limit_bytes {
        logs::truncate_bytes(&mut first, limit);
    }
    (first, complete_len.saturating_sub(rotated_len) as u64)
}

/// A container log being followed: the current file, how far it was read, and whose it is.
struct FollowedLog {
    file: std::path::PathBuf,
    offset: u64,
    timestamps: bool,
    pod_uid: String,
    container: String,
}

/// Streams lines appended to the log until the container stops or the client goes away.
async fn follow(
    ctx: Arc<Context>,
    mut log: FollowedLog,
    first: String,
    tx: tokio::sync::mpsc::Sender<Result<String, std::io::Error>>,
) {
    if tx.send(Ok(first)).await.is_err() {
        return;
    }
    let mut pending = String::new();
    let mut idle = 0u32;
    loop {
        let chunk = read_from(&log.file, &mut log.offset).await;
        if chunk.is_empty() {
            idle += 1;
            // Every 2 s without output, check whether the container still runs.
            if idle.is_multiple_of(10) && !still_running(&ctx, &log.pod_uid, &log.container).await {
                return;
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        idle = 0;
        pending.push_str(&chunk);
        let complete_len = pending.rfind('\n').map_or(0, |i| i + 1);
        let lines: Vec<&str> = pending[..complete_len].lines().collect();
        let out = logs::render(&lines, log.timestamps);
        pending = pending[complete_len..].to_string();
        if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
            return;
        }
    }
}

/// What was appended to `file` since `offset` (moved past it); from the start of a file shorter
/// than the offset, which is a new one (the log was rotated).
async fn read_from(file: &std::path::Path, offset: &mut u64) -> String {
    let mut chunk = String::new();
    if let Ok(mut f) = tokio::fs::File::open(file).await {
        if f.metadata().await.is_ok_and(|m| m.len() < *offset) {
            *offset = 0;
        }
        if f.seek(std::io::SeekFrom::Start(*offset)).await.is_ok() {
            if let Ok(n) = f.read_to_string(&mut chunk).await {
                *offset += n as u64;
            }
        }
    }
    chunk
}

async fn still_running(ctx: &Context, uid: &str, container: &str) -> bool {
    let selector = HashMap::from([
        (labels::POD_UID.to_string(), uid.to_string()),
        (labels::CONTAINER_NAME.to_string(), container.to_string()),
    ]);
    match ctx.cri.list_containers(selector).await {
        Ok(list) => list
            .iter()
            .max_by_key(|c| c.metadata.as_ref().map_or(0, |m| m.attempt))
            .is_some_and(|c| {
                c.state == keelson_proto::runtime::v1::ContainerState::ContainerRunning as i32
            }),
        Err(_) => true,
    }
}
