//! Measurement helper for scripts/bench.d/pod-startup.sh (not a test):
//!   bench_pod_startup cri --socket S --count N      bare CRI sequence per pod, N pods at once
//!   bench_pod_startup api --kubeconfig K --node X --count N --prefix P [--agent-log F]
//!                                                   N pods created at once; creation -> Running via watch
//!   bench_pod_startup cleanup --socket S            stop and remove every sandbox (CNI DEL)
//! Prints one line per figure: `<name> p50_ms p99_ms`; then the per-phase breakdown as
//! `phase <name> p50_ms p99_ms` lines: for the bare sequence each CRI call, for the API path the
//! agent's "pod start phases" log lines (F) joined by pod with this helper's own clock: the API
//! create and watch delivery before the agent's first sync, and the status watch after its write.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use keelson_agent::cri::{Cri, CriError, GrpcCri};
use keelson_proto::runtime::v1 as cri;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;

const IMAGE: &str = "127.0.0.1:5000/keelson/podname-http:1";

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{name} {:.1} {:.1}",
        percentile(&ms, 50.0),
        percentile(&ms, 99.0)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = arg(&args, "--count")
        .and_then(|c| c.parse().ok())
        .unwrap_or(30);
    match args.get(1).map(String::as_str) {
        Some("cri") => bare_cri(&arg(&args, "--socket").expect("--socket"), count).await,
        Some("api") => {
            let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig");
            let node = arg(&args, "--node").expect("--node");
            let prefix = arg(&args, "--prefix").unwrap_or_else(|| "bench".into());
            let agent_log = arg(&args, "--agent-log");
            via_api(&kubeconfig, &node, &prefix, count, agent_log.as_deref()).await
        }
        Some("cleanup") => cleanup(&arg(&args, "--socket").expect("--socket")).await,
        _ => anyhow::bail!("usage: bench_pod_startup cri|api|cleanup ..."),
    }
}

/// RunPodSandbox + ImageStatus (present) + CreateContainer + StartContainer for `count` pods at
/// once: the floor the agent's startup is compared with.
async fn bare_cri(socket: &str, count: usize) -> anyhow::Result<()> {
    let cri = Arc::new(connect(socket).await?);
    let logs = tempfile::tempdir()?;
    let mut tasks = Vec::new();
    for i in 0..count {
        let cri = cri.clone();
        let log_dir = logs.path().join(format!("p{i}")).display().to_string();
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let (id, calls) = start_bare_pod(cri.as_ref(), i, log_dir).await?;
            Ok::<_, CriError>((start.elapsed().as_secs_f64() * 1000.0, id, calls))
        }));
    }
    let mut ms = Vec::new();
    let mut ids = Vec::new();
    let mut phases = Phases::default();
    for t in tasks {
        let (elapsed, id, calls) = t.await??;
        ms.push(elapsed);
        ids.push(id);
        for (name, took) in calls {
            phases.add(name, took);
        }
    }
    report("bare_cri", ms);
    phases.report();
    for id in ids {
        cri.stop_pod_sandbox(&id).await?;
        cri.remove_pod_sandbox(&id).await?;
    }
    Ok(())
}

/// Milliseconds per phase name, over many pods, in the order first seen.
#[derive(Default)]
struct Phases(Vec<(String, Vec<f64>)>);

impl Phases {
    fn add(&mut self, name: &str, ms: f64) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, all)) => all.push(ms),
            None => self.0.push((name.to_string(), vec![ms])),
        }
    }

    fn report(self) {
        for (name, ms) in self.0 {
            report(&format!("phase {name}"), ms);
        }
    }
}

fn since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// The CRI calls of one pod with one container, as the agent makes them; returns the sandbox
/// and each call's milliseconds.
async fn start_bare_pod(
    cri: &dyn Cri,
    i: usize,
    log_directory: String,
) -> Result<(String, Vec<(&'static str, f64)>), CriError> {
    let name = format!("bare-{i}");
    let labels = HashMap::from([("io.keelson.bench".to_string(), "bare".to_string())]);
    let config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.clone(),
            uid: format!("bare-uid-{i}"),
            namespace: "bench".into(),
            attempt: 0,
        }),
        hostname: name,
        log_directory,
        labels: labels.clone(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("/keelson-bench/pod-bare-{i}"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut calls = Vec::new();
    let t = Instant::now();
    let id = cri.run_pod_sandbox(config.clone()).await?;
    calls.push(("sandbox", since(t)));
    let t = Instant::now();
    // The image is present: like the agent under IfNotPresent (and the kubelet), ask for its
    // status instead of pulling it again (which asks the registry).
    let image_ref = match cri.image_status(IMAGE).await? {
        Some(present) => present.id,
        None => cri.pull_image(IMAGE, None, Some(config.clone())).await?,
    };
    calls.push(("pull", since(t)));
    let container = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: "app".into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: image_ref,
            ..Default::default()
        }),
        log_path: "app/0.log".into(),
        labels,
        ..Default::default()
    };
    let t = Instant::now();
    let cid = cri.create_container(&id, container, config).await?;
    calls.push(("create", since(t)));
    let t = Instant::now();
    cri.start_container(&cid).await?;
    calls.push(("start", since(t)));
    Ok((id, calls))
}

fn unix_ms(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// The agent's "pod start phases" lines by pod name: `key=value` fields, numbers only.
fn agent_phases(log: &str, prefix: &str) -> HashMap<String, Vec<(String, f64)>> {
    let mut by_pod = HashMap::new();
    for line in log.lines().filter(|l| l.contains("pod start phases")) {
        let mut name = None;
        let mut fields = Vec::new();
        for (key, value) in line.split_whitespace().filter_map(|w| w.split_once('=')) {
            if key == "pod" {
                name = value.strip_prefix("default/").map(str::to_string);
            } else if let Ok(v) = value.parse::<f64>() {
                fields.push((key.trim_end_matches("_ms").to_string(), v));
            }
        }
        if let Some(name) = name.filter(|n| n.starts_with(&format!("{prefix}-"))) {
            by_pod.insert(name, fields);
        }
    }
    by_pod
}

/// Creation -> Running split into the API's part before the agent saw the pod, the agent's
/// phases, and the status's way back to a watcher.
fn api_phases(
    log: &str,
    prefix: &str,
    created: &HashMap<String, SystemTime>,
    running: &HashMap<String, SystemTime>,
) -> Phases {
    let mut phases = Phases::default();
    for (pod, fields) in agent_phases(log, prefix) {
        let (Some(sent), Some(seen_by_watcher)) = (created.get(&pod), running.get(&pod)) else {
            continue;
        };
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let (Some(seen), Some(total)) = (get("seen_unix"), get("total")) else {
            continue;
        };
        phases.add("api create + watch to agent", seen - unix_ms(*sent));
        for (name, ms) in fields
            .iter()
            .filter(|(n, _)| n != "seen_unix" && n != "total")
        {
            phases.add(&format!("agent {name}"), *ms);
        }
        phases.add(
            "status watch to client",
            unix_ms(*seen_by_watcher) - (seen + total),
        );
    }
    phases
}

/// Creates `count` pods at once and watches them until all run; times creation -> Running.
async fn via_api(
    kubeconfig: &str,
    node: &str,
    prefix: &str,
    count: usize,
    agent_log: Option<&str>,
) -> anyhow::Result<()> {
    let client = keelson_daemon::client(Some(Path::new(kubeconfig))).await?;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant, SystemTime)>();
    let watch_api = api.clone();
    let selector = format!("bench={prefix}");
    tokio::spawn(async move {
        let mut stream = watcher(watch_api, watcher::Config::default().labels(&selector)).boxed();
        while let Some(Ok(event)) = stream.next().await {
            let pods = match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => vec![p],
                _ => continue,
            };
            for p in pods {
                let running = p.status.as_ref().is_some_and(|s| {
                    s.phase.as_deref() == Some("Running")
                        && s.container_statuses.as_ref().is_some_and(|cs| {
                            cs.iter()
                                .all(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
                        })
                });
                if running {
                    let name = p.metadata.name.unwrap_or_default();
                    let _ = tx.send((name, Instant::now(), SystemTime::now()));
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut created = HashMap::new();
    let mut created_wall = HashMap::new();
    let mut creates = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "bench": prefix } },
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [{ "name": "app", "image": IMAGE, "imagePullPolicy": "IfNotPresent" }]
            }
        }))?;
        let api = api.clone();
        created.insert(name.clone(), Instant::now());
        created_wall.insert(name.clone(), SystemTime::now());
        creates.push(tokio::spawn(async move {
            api.create(&PostParams::default(), &pod).await
        }));
    }
    for c in creates {
        c.await??;
    }
    let mut ms = HashMap::new();
    let mut running_wall = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while ms.len() < count && Instant::now() < deadline {
        let next = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        if let Ok(Some((name, at, wall))) = next {
            if let Some(start) = created.get(&name) {
                running_wall.entry(name.clone()).or_insert(wall);
                ms.entry(name)
                    .or_insert_with(|| at.duration_since(*start).as_secs_f64() * 1000.0);
            }
        }
    }
    anyhow::ensure!(
        ms.len() == count,
        "only {} of {count} pods reached Running",
        ms.len()
    );
    report("agent_pod_startup", ms.into_values().collect());
    if let Some(path) = agent_log {
        // The agent logs its line right after the status write the watcher saw.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let log = std::fs::read_to_string(path)?;
        api_phases(&log, prefix, &created_wall, &running_wall).report();
    }
    if std::env::var_os("KEEP_PODS").is_none() {
        for i in 0..count {
            let dp = DeleteParams {
                grace_period_seconds: Some(1),
                ..Default::default()
            };
            let _ = api.delete(&format!("{prefix}-{i}"), &dp).await;
        }
    }
    Ok(())
}

async fn cleanup(socket: &str) -> anyhow::Result<()> {
    let cri = connect(socket).await?;
    keelson_agent::cri::remove_all_sandboxes(&cri).await?;
    Ok(())
}

async fn connect(socket: &str) -> anyhow::Result<GrpcCri> {
    let metrics = Arc::new(keelson_agent::metrics::Metrics::new());
    Ok(GrpcCri::connect(Path::new(socket), metrics).await?)
}
