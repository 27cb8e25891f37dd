//! Measurement helper for scripts/bench.d/pod-startup.sh (not a test):
//!   bench_pod_startup cri --socket S --count N      bare CRI sequence per pod, N pods at once
//!   bench_pod_startup api --kubeconfig K --node X --count N --prefix P
//!                                                   N pods created at once; creation -> Running via watch
//!   bench_pod_startup cleanup --socket S            stop and remove every sandbox (CNI DEL)
//! Prints one line per figure: `<name> p50_ms p99_ms`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
            via_api(&kubeconfig, &node, &prefix, count).await
        }
        Some("cleanup") => cleanup(&arg(&args, "--socket").expect("--socket")).await,
        _ => anyhow::bail!("usage: bench_pod_startup cri|api|cleanup ..."),
    }
}

/// RunPodSandbox + PullImage (present) + CreateContainer + StartContainer for `count` pods at
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
            let id = start_bare_pod(cri.as_ref(), i, log_dir).await?;
            Ok::<_, CriError>((start.elapsed().as_secs_f64() * 1000.0, id))
        }));
    }
    let mut ms = Vec::new();
    let mut ids = Vec::new();
    for t in tasks {
        let (elapsed, id) = t.await??;
        ms.push(elapsed);
        ids.push(id);
    }
    report("bare_cri", ms);
    for id in ids {
        cri.stop_pod_sandbox(&id).await?;
        cri.remove_pod_sandbox(&id).await?;
    }
    Ok(())
}

/// The CRI calls of one pod with one container, as the agent makes them; returns the sandbox.
async fn start_bare_pod(
    cri: &dyn Cri,
    i: usize,
    log_directory: String,
) -> Result<String, CriError> {
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
    let id = cri.run_pod_sandbox(config.clone()).await?;
    let image_ref = cri.pull_image(IMAGE, None, Some(config.clone())).await?;
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
    let cid = cri.create_container(&id, container, config).await?;
    cri.start_container(&cid).await?;
    Ok(id)
}

/// Creates `count` pods at once and watches them until all run; times creation -> Running.
async fn via_api(kubeconfig: &str, node: &str, prefix: &str, count: usize) -> anyhow::Result<()> {
    let client = keelson_daemon::client(Some(Path::new(kubeconfig))).await?;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
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
                    let _ = tx.send((p.metadata.name.unwrap_or_default(), Instant::now()));
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut created = HashMap::new();
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
        creates.push(tokio::spawn(async move {
            api.create(&PostParams::default(), &pod).await
        }));
    }
    for c in creates {
        c.await??;
    }
    let mut ms = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while ms.len() < count && Instant::now() < deadline {
        if let Ok(Some((name, at))) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await
        {
            if let Some(start) = created.get(&name) {
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
