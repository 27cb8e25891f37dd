//! `scripts/bench apiserver`: figures for a running keelson-apiserver, each beside the floor
//! measured in the same run (its store bare: raw SQLite commits on the same disk, or raw etcd
//! transactions). Prints a human line and a JSON line (with the backend) per figure.
//! Usage: bench <kubeconfig> <scratch-dir> [<etcd client URL>: the server stores in that etcd]
//!        bench scale <kubeconfig> <pods> <watchers>: the figures of a large store (`scale.rs`)

mod floor;
mod scale;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use keelson_testing::median;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The load generator shares the machine's cores with the server and its store: it should take
// as little of them as it can (the floor's writers run in this process too).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The store the server under test uses: sqlite or etcd.
static BACKEND: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn figure(name: &str, value: f64, unit: &str, baseline: Option<(&str, f64)>) {
    let base = baseline
        .map(|(b, v)| format!("   (baseline {b}: {v:.3} {unit})"))
        .unwrap_or_default();
    println!("{name:<44} {value:>12.3} {unit}{base}");
    let backend = BACKEND.get().map_or("sqlite", String::as_str);
    let mut j = serde_json::json!({ "bench": "apiserver", "backend": backend, "figure": name, "value": value, "unit": unit });
    if let Some((b, v)) = baseline {
        j["baseline"] = serde_json::json!({ "name": b, "value": v });
    }
    println!("{j}");
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        serde_json::json!({ "metadata": { "name": name }, "data": { "k": "v" } }),
    )
    .unwrap()
}

async fn writes_per_second(api: &Api<ConfigMap>, writers: usize, prefix: &str) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let api = api.clone();
            let prefix = prefix.to_string();
            tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < ROUND {
                    api.create(&PostParams::default(), &cm(&format!("{prefix}-{w}-{n}")))
                        .await
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// One round of writes; the floor's and the server's alternate, ROUNDS of each.
const ROUND: Duration = Duration::from_secs(1);
const ROUNDS: usize = 5;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("scale") {
        let client = keelson_daemon::client(Some(std::path::Path::new(&args[2])))
            .await
            .unwrap();
        let (pods, watchers) = (args[3].parse().unwrap(), args[4].parse().unwrap());
        return scale::run(client, pods, watchers).await;
    }
    let (kubeconfig, scratch) = (&args[1], std::path::PathBuf::from(&args[2]));
    let etcd = args.get(3);
    let backend = if etcd.is_some() { "etcd" } else { "sqlite" };
    BACKEND.set(backend.to_string()).unwrap();
    let client = keelson_daemon::client(Some(std::path::Path::new(kubeconfig)))
        .await
        .unwrap();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in ["bench-w", "bench-p", "bench-watch"] {
        let obj: Namespace =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": ns } })).unwrap();
        let _ = ns_api.create(&PostParams::default(), &obj).await;
    }
    let mut floor = match etcd {
        Some(url) => floor::Floor::etcd(url).await,
        None => floor::Floor::sqlite(&scratch),
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-w");
    create_latency(&api, &floor).await;
    durable_writes(&api, &mut floor).await;
    list_pods(&client).await;
    watch_delivery(&client).await;
}

async fn create_latency(api: &Api<ConfigMap>, floor: &floor::Floor) {
    eprintln!("create latency (1,000 sequential creates)...");
    let mut lat = Vec::new();
    for i in 0..1000 {
        let t = Instant::now();
        api.create(&PostParams::default(), &cm(&format!("lat-{i}")))
            .await
            .unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    let (p50, p99) = floor.one_ms;
    figure(
        "create latency p50",
        pct(&lat, 0.5),
        "ms",
        Some((floor.one_name, p50)),
    );
    figure(
        "create latency p99",
        pct(&lat, 0.99),
        "ms",
        Some((floor.one_name, p99)),
    );
    request_floor(api).await;
}

/// The part of a create's latency that is the request itself (client, TLS, HTTP, routing,
/// authentication, authorization, JSON) and not the store: a GET answered from memory
/// (resourceVersion=0, no store round trip) of one of the objects just made.
async fn request_floor(api: &Api<ConfigMap>) {
    let mut lat = Vec::new();
    for i in 0..1000 {
        let t = Instant::now();
        let params = kube::api::GetParams::any();
        api.get_with(&format!("lat-{i}"), &params).await.unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    figure(
        "GET from memory p50 (the request's own cost)",
        pct(&lat, 0.5),
        "ms",
        None,
    );
}

/// Writes/s of the server and of its bare store, each the median of ROUNDS rounds taken in
/// turn: on a shared machine the disk's and CPU's pace drift over seconds, and a floor measured
/// once, before the server, was off by up to half.
async fn durable_writes(api: &Api<ConfigMap>, floor: &mut floor::Floor) {
    for writers in [1, 64] {
        eprintln!("durable writes, {writers} writer(s): {ROUNDS} rounds of 1 s each, server and bare store in turn...");
        let (mut server, mut bare) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            bare.push(floor.writes(writers, ROUND).await);
            server.push(writes_per_second(api, writers, &format!("w{writers}-{round}")).await);
        }
        let floor_name = match writers {
            1 => floor.single_name,
            _ => floor.many_name,
        };
        let name = match writers {
            1 => "durable writes/s, 1 writer".to_string(),
            _ => format!("durable writes/s, {writers} writers"),
        };
        figure(
            &name,
            median(server),
            "writes/s",
            Some((floor_name, median(bare))),
        );
    }
}

/// Fills bench-p up to 10,000 pods with 32 concurrent writers.
async fn create_pods(pods: &Api<Pod>, total: usize) {
    let existing = pods.list_metadata(&ListParams::default()).await.unwrap();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(existing.items.len()));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (pods, next) = (pods.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= total {
                        return;
                    }
                    let p: Pod = serde_json::from_value(serde_json::json!({
                        "metadata": { "name": format!("p-{i}"), "labels": { "app": "bench", "i": i.to_string() } },
                        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "busybox", "ports": [{ "containerPort": 80 }] }] },
                    })).unwrap();
                    pods.create(&PostParams::default(), &p).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn list_pods(client: &kube::Client) {
    eprintln!("creating 10,000 pods for the list...");
    create_pods(&Api::namespaced(client.clone(), "bench-p"), 10_000).await;
    let url = "/api/v1/namespaces/bench-p/pods";
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let req = http::Request::get(url).body(Vec::new()).unwrap();
        let body = client.request_text(req).await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        bytes = body.len();
    }
    times.sort_by(f64::total_cmp);
    figure("list 10,000 pods (median of 5)", times[2], "ms", None);
    let size = bytes as f64 / 1e6;
    figure("list 10,000 pods, response size", size, "MB", None);
}

type SentAt = Arc<std::sync::Mutex<std::collections::HashMap<String, Instant>>>;

/// One watcher: the delay of each of `events` ADDED events after its create was sent.
async fn watcher(
    stream: impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>>,
    sent: SentAt,
    delays: Arc<std::sync::Mutex<Vec<f64>>>,
    events: usize,
) {
    futures::pin_mut!(stream);
    let mut seen = 0;
    while let Some(Ok(ev)) = stream.next().await {
        let WatchEvent::Added(o) = ev else { continue };
        let at = Instant::now();
        let name = o.metadata.name.as_deref().unwrap_or("");
        if let Some(t0) = sent.lock().unwrap().get(name) {
            let ms = at.duration_since(*t0).as_secs_f64() * 1000.0;
            delays.lock().unwrap().push(ms);
        }
        seen += 1;
        if seen == events {
            return;
        }
    }
}

async fn watch_delivery(client: &kube::Client) {
    eprintln!("watch delivery to 100 watchers (200 writes)...");
    let wapi: Api<ConfigMap> = Api::namespaced(client.clone(), "bench-watch");
    let d = delivery(&wapi, 100, (200, Duration::from_millis(5)), "w").await;
    figure("watch delivery p50, 100 watchers", pct(&d, 0.5), "ms", None);
    figure(
        "watch delivery p99, 100 watchers",
        pct(&d, 0.99),
        "ms",
        None,
    );
    figure("watch events delivered", d.len() as f64, "events", None);
}

/// Opens `watchers` watches, then creates `writes` config maps `spacing` apart (named
/// `<tag>-<i>`); the delays from each create to its ADDED event at every watch, sorted.
async fn delivery(
    api: &Api<ConfigMap>,
    watchers: usize,
    (writes, spacing): (usize, Duration),
    tag: &str,
) -> Vec<f64> {
    let sent: SentAt = Default::default();
    let delays: Arc<std::sync::Mutex<Vec<f64>>> = Default::default();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        // Every watch is open before the first write.
        let stream = api.watch(&WatchParams::default(), &rv).await.unwrap();
        let (sent, delays) = (sent.clone(), delays.clone());
        tasks.push(tokio::spawn(watcher(stream, sent, delays, writes)));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..writes {
        let name = format!("{tag}-{i}");
        sent.lock().unwrap().insert(name.clone(), Instant::now());
        api.create(&PostParams::default(), &cm(&name))
            .await
            .unwrap();
        tokio::time::sleep(spacing).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(60), t).await;
    }
    let mut d = delays.lock().unwrap().clone();
    d.sort_by(f64::total_cmp);
    d
}
