//! `scripts/bench scheduler`: how fast keelson-scheduler binds pending Pods across a number of
//! Nodes (upstream scheduler_perf's SchedulingBasic shape: nodes with capacity, pods with
//! requests), beside the floor measured in the same run: the same number of bindings POSTed
//! straight to the API server, 64 at a time, with no decisions, timed as the scheduler is: until
//! a watch sees the last Pod bound; and the scheduler's peak memory and CPU time.
//! Usage: bench_scheduler <kubeconfig> <scheduler-binary> [pods (3000)] [nodes (100)]
//!        bench_scheduler <kubeconfig> <scheduler-binary> workload <name> [measured pods]
//! The second form runs one of upstream scheduler_perf's workloads (workloads.rs) at its
//! 5000Nodes size: the Pods created first are scheduled untimed, then the scheduler stops, the
//! measured Pods are created, and it starts again and is timed as above, beside the same floor.

mod workloads;

use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Instant;

fn json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

async fn create_pods(client: &kube::Client, ns: &str, n: usize, scheduler: &str) {
    let mut template = serde_json::json!({
        "spec": { "schedulerName": scheduler,
            "containers": [{ "name": "c", "image": "busybox",
                "resources": { "requests": { "cpu": "100m", "memory": "500Mi" } } }] },
    });
    template["metadata"] = serde_json::json!({});
    create_from(client, ns, n, &template, "p").await;
}

/// `n` Pods named `<prefix><i>` in `ns` from `template` (its metadata and spec).
async fn create_from(
    client: &kube::Client,
    ns: &str,
    n: usize,
    template: &serde_json::Value,
    prefix: &str,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let mut pod = template.clone();
            pod["metadata"]["name"] = format!("{prefix}{i}").into();
            let pod: Pod = json(pod);
            async move { api.create(&PostParams::default(), &pod).await.map(|_| ()) }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<_>>()
        .await
        .expect("create pods");
}

/// `count` Ready Nodes with room for both sets of pods (the floor's are bound to them too).
async fn create_nodes(client: &kube::Client, count: usize) {
    create_labelled_nodes(client, count, "32", "128Gi", |_| serde_json::json!({})).await
}

/// `count` Ready Nodes of `cpu` and `memory`, node i with `labels(i)` and its hostname.
async fn create_labelled_nodes(
    client: &kube::Client,
    count: usize,
    cpu: &str,
    memory: &str,
    labels: fn(usize) -> serde_json::Value,
) {
    let api: Api<Node> = Api::all(client.clone());
    stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let mut l = labels(i);
            l["kubernetes.io/hostname"] = format!("n{i}").into();
            let node: Node = json(serde_json::json!({
                "metadata": { "name": format!("n{i}"), "labels": l },
                "status": { "allocatable": { "cpu": cpu, "memory": memory, "pods": "110" },
                    "capacity": { "cpu": cpu, "memory": memory, "pods": "110" },
                    "conditions": [{ "type": "Ready", "status": "True" }] },
            }));
            async move { api.create(&PostParams::default(), &node).await.map(|_| ()) }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<_>>()
        .await
        .expect("create nodes");
}

/// The process's peak resident memory (VmHWM), KiB; 0 if unreadable.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The process's CPU time so far (user + system), seconds; 0 if unreadable.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks
        / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64
}

/// Pods per second for `n` bindings POSTed directly, round-robin over the nodes, until the same
/// watch that times the scheduler has seen every Pod bound.
async fn binding_floor(client: &kube::Client, n: usize, nodes: usize) -> f64 {
    let api: Api<Pod> = Api::namespaced(client.clone(), "floor");
    let start = Instant::now();
    let watcher_client = client.clone();
    let seen = tokio::spawn(async move { all_bound(&watcher_client, "floor", n).await });
    stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let body = serde_json::json!({ "apiVersion": "v1", "kind": "Binding",
                "metadata": { "name": format!("p{i}") },
                "target": { "apiVersion": "v1", "kind": "Node", "name": format!("n{}", i % nodes) } });
            async move {
                let bound: Result<serde_json::Value, _> = api
                    .create_subresource("binding", &format!("p{i}"), &PostParams::default(), &body)
                    .await;
                bound.map(|_| ())
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<_>>()
        .await
        .expect("bindings");
    seen.await.expect("floor watch");
    n as f64 / start.elapsed().as_secs_f64()
}

/// Waits until every Pod in `ns` has a node; returns Pods per node and when the first was seen
/// bound.
async fn all_bound(
    client: &kube::Client,
    ns: &str,
    n: usize,
) -> (BTreeMap<String, usize>, Instant) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    bound_by(api, watcher::Config::default(), n).await
}

/// `all_bound` for the Pods `api` and `config` select.
async fn bound_by(
    api: Api<Pod>,
    config: watcher::Config,
    n: usize,
) -> (BTreeMap<String, usize>, Instant) {
    let mut nodes: BTreeMap<String, String> = BTreeMap::new();
    let mut first = None;
    let mut events = watcher(api, config).boxed();
    while nodes.len() < n {
        let pods = match events.try_next().await.expect("watch").expect("stream") {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => vec![p],
            _ => vec![],
        };
        for p in pods {
            if let Some(node) = p.spec.and_then(|s| s.node_name) {
                first.get_or_insert_with(Instant::now);
                let key = format!(
                    "{}/{}",
                    p.metadata.namespace.unwrap_or_default(),
                    p.metadata.name.unwrap_or_default()
                );
                nodes.insert(key, node);
            }
        }
    }
    let per_node = nodes.into_values().fold(BTreeMap::new(), |mut m, node| {
        *m.entry(node).or_default() += 1;
        m
    });
    (per_node, first.unwrap_or_else(Instant::now))
}

/// `bound` while the scheduler runs: one that exits first ends the bench with its status (its
/// log is above) instead of leaving it waiting for bindings that never come.
async fn while_running<T>(
    child: &mut std::process::Child,
    bound: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(bound);
    loop {
        tokio::select! {
            out = &mut bound => return out,
            _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("keelson-scheduler exited ({status}) before every pod was bound");
                }
            }
        }
    }
}

/// Starts keelson-scheduler against `kubeconfig`: its log goes to the bench's stderr, so a
/// scheduler that stops (a panic) says why instead of leaving the bench waiting.
fn start_scheduler(scheduler: &str, kubeconfig: &str) -> std::process::Child {
    Command::new(scheduler)
        .args([
            "--kubeconfig",
            kubeconfig,
            "--metrics-bind-address",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start keelson-scheduler")
}

/// SIGTERM, and waits for it to exit (its Lease released).
fn stop(child: &mut std::process::Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

async fn create_namespace(client: &kube::Client, name: &str, labels: serde_json::Value) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &json(serde_json::json!({ "metadata": { "name": name, "labels": labels } })),
        )
        .await
        .expect("namespace");
}

/// One scheduler_perf workload: untimed setup, then the measured Pods beside the floor.
async fn workload(
    client: &kube::Client,
    kubeconfig: &str,
    scheduler: &str,
    name: &str,
    measure: usize,
) {
    let w = workloads::all(measure)
        .into_iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no workload {name}"));
    create_namespace(client, "floor", serde_json::json!({})).await;
    for (ns, labels) in &w.namespaces {
        create_namespace(client, ns, labels.clone()).await;
    }
    eprintln!("{name}: {} nodes (4 cpu, 32Gi, 110 pods each)...", w.nodes);
    create_labelled_nodes(client, w.nodes, "4", "32Gi", w.node_labels).await;
    let init: usize = w.init.iter().map(|p| p.count).sum();
    let phase = |p: &str| watcher::Config::default().labels(&format!("bench-phase={p}"));
    if init > 0 {
        eprintln!("{name}: {init} pods created and scheduled first (not timed)...");
        for (k, set) in w.init.iter().enumerate() {
            let mut t = set.template.clone();
            t["metadata"]["labels"]["bench-phase"] = "init".into();
            create_from(client, &set.namespace, set.count, &t, &format!("init{k}-")).await;
        }
        let mut child = start_scheduler(scheduler, kubeconfig);
        let bound = bound_by(Api::all(client.clone()), phase("init"), init);
        while_running(&mut child, bound).await;
        stop(&mut child);
    }
    let n = w.measure.count;
    eprintln!("{name}: floor, {n} bindings POSTed, 64 at a time...");
    create_pods(client, "floor", n, "nobody").await;
    let floor = binding_floor(client, n, w.nodes).await;
    let mut t = w.measure.template.clone();
    t["metadata"]["labels"]["bench-phase"] = "measure".into();
    create_from(client, &w.measure.namespace, n, &t, "m").await;
    eprintln!("{name}: keelson-scheduler binding {n} measured pods...");
    let start = Instant::now();
    let mut child = start_scheduler(scheduler, kubeconfig);
    let bound = bound_by(Api::all(client.clone()), phase("measure"), n);
    let (per_node, first) = while_running(&mut child, bound).await;
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let sustained = (n - 1) as f64 / first.elapsed().as_secs_f64();
    let peak_rss_mib = peak_rss_kib(child.id()) as f64 / 1024.0;
    let cpu = cpu_seconds(child.id());
    stop(&mut child);
    let pods_total = init + n;
    let figure = format!("{name}, {n} of {pods_total} pods, {} nodes", w.nodes);
    println!(
        "{figure:<72} {rate:>8.1} pods/s from start, {sustained:>8.1} first to last   (floor {floor:.1} pods/s; target {:.0}; peak RSS {peak_rss_mib:.1} MiB; CPU {cpu:.2} s; {} nodes used)",
        w.target,
        per_node.len()
    );
    println!(
        "{}",
        serde_json::json!({ "bench": "scheduler", "workload": name, "figure": figure, "unit": "pods/s",
            "value": rate, "sustained": sustained, "target": w.target,
            "baseline": { "name": "direct bindings, 64 at a time", "value": floor },
            "peak_rss_mib": peak_rss_mib, "cpu_seconds": cpu, "nodes_used": per_node.len() })
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (kubeconfig, scheduler) = (&args[1], &args[2]);
    if args.get(3).map(String::as_str) == Some("workload") {
        let client = keelson_daemon::client(Some(kubeconfig.as_ref()))
            .await
            .expect("client");
        let measure = args.get(5).map(|s| s.parse().expect("pods")).unwrap_or(0);
        workload(&client, kubeconfig, scheduler, &args[4], measure).await;
        return;
    }
    let n: usize = args
        .get(3)
        .map(|s| s.parse().expect("pods"))
        .unwrap_or(3000);
    let nodes: usize = args
        .get(4)
        .map(|s| s.parse().expect("nodes"))
        .unwrap_or(100);
    let client = keelson_daemon::client(Some(kubeconfig.as_ref()))
        .await
        .expect("client");
    for ns in ["floor", "bench"] {
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &json(serde_json::json!({ "metadata": { "name": ns } })),
            )
            .await
            .expect("namespace");
    }
    eprintln!("creating {nodes} nodes and {n} pending pods twice...");
    create_nodes(&client, nodes).await;
    create_pods(&client, "floor", n, "nobody").await;
    create_pods(&client, "bench", n, "default-scheduler").await;

    eprintln!("floor: {n} bindings POSTed, 64 at a time...");
    let floor = binding_floor(&client, n, nodes).await;

    eprintln!("keelson-scheduler: binding {n} pending pods...");
    let start = Instant::now();
    let mut child = start_scheduler(scheduler, kubeconfig);
    let (per_node, first) = while_running(&mut child, all_bound(&client, "bench", n)).await;
    let rate = n as f64 / start.elapsed().as_secs_f64();
    // What the scheduler sustains once running, as scheduler_perf measures it (the floor has no
    // process to start): from the first binding seen to the last.
    let ready_ms = first.duration_since(start).as_secs_f64() * 1000.0;
    let sustained = (n - 1) as f64 / first.elapsed().as_secs_f64();
    let peak_rss_mib = peak_rss_kib(child.id()) as f64 / 1024.0;
    let cpu = cpu_seconds(child.id());
    stop(&mut child);

    let (min, max) = (
        per_node.values().min().copied().unwrap_or(0),
        per_node.values().max().copied().unwrap_or(0),
    );
    let name = format!("pods bound/s, {n} pods over {nodes} nodes (from scheduler start)");
    println!("{name:<64} {rate:>10.1} pods/s   (baseline direct bindings, 64 at a time, until seen: {floor:.1} pods/s)");
    let sustained_name =
        format!("pods bound/s, {n} pods over {nodes} nodes (first to last binding)");
    println!("{sustained_name:<64} {sustained:>10.1} pods/s   (same baseline: {floor:.1} pods/s)");
    println!(
        "{:<64} {ready_ms:>10.1} ms",
        "scheduler start to its first binding seen (lists, lease)"
    );
    println!(
        "{:<64} {:>10} pods",
        "pods per node, fewest / most",
        format!("{min} / {max}")
    );
    println!(
        "{:<64} {peak_rss_mib:>10.1} MiB",
        format!("scheduler peak RSS, {n} pods over {nodes} nodes")
    );
    println!(
        "{:<64} {cpu:>10.2} s",
        "scheduler CPU time, start to last binding"
    );
    println!(
        "{}",
        serde_json::json!({ "bench": "scheduler", "figure": name, "unit": "pods/s", "value": rate,
            "baseline": { "name": "direct bindings, 64 at a time", "value": floor },
            "pods_per_node": { "min": min, "max": max, "nodes": per_node.len() },
            "peak_rss_mib": peak_rss_mib, "cpu_seconds": cpu, "start_to_first_binding_ms": ready_ms })
    );
    println!(
        "{}",
        serde_json::json!({ "bench": "scheduler", "figure": sustained_name, "unit": "pods/s",
            "value": sustained, "baseline": { "name": "direct bindings, 64 at a time", "value": floor } })
    );
}
