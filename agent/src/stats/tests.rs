//! The summary assembled from a fake runtime and a fake /proc: which pods and containers are
//! counted, their sums, rates between samples, and the JSON the kubelet's clients read.

use std::collections::HashMap;
use std::sync::Arc;

use keelson_proto::runtime::v1 as cri;
use serde_json::{json, Value};

use super::rate::{History, Sample};
use super::summary::{node_stats, NodeReading};
use super::Stats;
use crate::cri::{labels, Cri};
use crate::cri_fake::FakeCri;

pub(crate) const S: i64 = 1_000_000_000;
/// When the fake runtime last read its containers' usage: 2024-12-04T08:15:00Z.
pub(crate) const T0: i64 = 1_733_300_100 * S;
pub(crate) const MIB: u64 = 1 << 20;

pub(crate) struct Fixture {
    pub fake: Arc<FakeCri>,
    pub stats: Arc<Stats>,
    /// Container id by name.
    pub ids: HashMap<&'static str, String>,
    _proc: tempfile::TempDir,
}

fn pod_labels(name: &str, uid: &str, node: &str) -> HashMap<String, String> {
    HashMap::from([
        (labels::POD_NAME.to_string(), name.to_string()),
        (labels::POD_NAMESPACE.to_string(), "default".to_string()),
        (labels::POD_UID.to_string(), uid.to_string()),
        (labels::NODE.to_string(), node.to_string()),
    ])
}

/// A pod's sandbox and its started containers, labelled as the agent labels them.
async fn run_pod(
    fake: &FakeCri,
    name: &str,
    node: &str,
    containers: &[&'static str],
) -> Vec<(&'static str, String)> {
    let pod = pod_labels(name, &format!("uid-{name}"), node);
    let config = cri::PodSandboxConfig {
        labels: pod.clone(),
        ..Default::default()
    };
    let sandbox = fake.run_pod_sandbox(config.clone()).await.unwrap();
    let mut ids = Vec::new();
    for c in containers {
        let mut l = pod.clone();
        l.insert(labels::CONTAINER_NAME.to_string(), c.to_string());
        let cc = cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: c.to_string(),
                attempt: 0,
            }),
            labels: l,
            ..Default::default()
        };
        let id = fake
            .create_container(&sandbox, cc, config.clone())
            .await
            .unwrap();
        fake.start_container(&id).await.unwrap();
        ids.push((*c, id));
    }
    ids
}

/// The runtime's stats of container `id`: CPU time and working set read at `at_ns`.
pub(crate) fn usage(
    fake: &FakeCri,
    id: &str,
    at_ns: i64,
    cpu_ns: u64,
    ws: u64,
) -> cri::ContainerStats {
    let v = |value| Some(cri::UInt64Value { value });
    let status = futures::executor::block_on(fake.container_status(id)).unwrap();
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes {
            id: id.to_string(),
            metadata: status.metadata,
            labels: status.labels,
            annotations: HashMap::new(),
        }),
        // The runtime's own rate, which the agent ignores for its own.
        cpu: Some(cri::CpuUsage {
            timestamp: at_ns,
            usage_core_nano_seconds: v(cpu_ns),
            usage_nano_cores: v(42),
            ..Default::default()
        }),
        memory: Some(cri::MemoryUsage {
            timestamp: at_ns,
            working_set_bytes: v(ws),
            usage_bytes: v(ws + MIB),
            available_bytes: v(0),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Node n1 runs "web" (app: 3 s CPU, 10 MiB; sidecar: 1 s, 5 MiB; an exited "init" that still
/// has stats) and "api" (no container yet); "db" runs on another node sharing the runtime.
pub(crate) async fn fixture() -> Fixture {
    let fake = Arc::new(FakeCri::default());
    let mut ids: HashMap<&'static str, String> =
        run_pod(&fake, "web", "n1", &["app", "sidecar", "init"])
            .await
            .into_iter()
            .collect();
    run_pod(&fake, "api", "n1", &[]).await;
    ids.extend(run_pod(&fake, "db", "n2", &["db"]).await);
    fake.exit("init", 0, 1);
    *fake.container_stats.lock().unwrap() = vec![
        usage(&fake, &ids["app"], T0, 3 * S as u64, 10 * MIB),
        usage(&fake, &ids["sidecar"], T0, S as u64, 5 * MIB),
        usage(&fake, &ids["init"], T0, S as u64, MIB),
        usage(&fake, &ids["db"], T0, 9 * S as u64, 99 * MIB),
    ];
    let proc = tempfile::tempdir().unwrap();
    std::fs::write(
        proc.path().join("stat"),
        "cpu  1000 0 500 90000 10 0 0 0 0 0\nbtime 1733300000\n",
    )
    .unwrap();
    std::fs::write(
        proc.path().join("meminfo"),
        "MemTotal: 4000000 kB\nMemFree: 500000 kB\nMemAvailable: 3000000 kB\n",
    )
    .unwrap();
    let cri: Arc<dyn Cri> = fake.clone();
    let stats = Arc::new(Stats::with_proc_root(
        cri,
        "n1".into(),
        proc.path().to_path_buf(),
    ));
    Fixture {
        fake,
        stats,
        ids,
        _proc: proc,
    }
}

#[tokio::test]
async fn summary_of_the_nodes_running_containers_by_pod() {
    let f = fixture().await;
    let collected = f.stats.collect().await;
    assert!(collected.error.is_none());
    let v = serde_json::to_value(&collected.summary).unwrap();
    let created = |name: &str| {
        let c = futures::executor::block_on(f.fake.container_status(&f.ids[name])).unwrap();
        k8s_openapi::jiff::Timestamp::from_second(c.created_at / S)
            .unwrap()
            .to_string()
    };
    assert_eq!(v["node"]["nodeName"], "n1");
    assert_eq!(v["node"]["startTime"], "2024-12-04T08:13:20Z");
    // 1500 busy ticks of 10 ms; no rate before a sample.
    assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 15 * S);
    assert!(v["node"]["cpu"].get("usageNanoCores").is_none());
    assert_eq!(v["node"]["memory"]["workingSetBytes"], 1_000_000u64 * 1024);
    assert_eq!(v["node"]["memory"]["availableBytes"], 3_000_000u64 * 1024);
    assert_eq!(v["node"]["memory"]["usageBytes"], 3_500_000u64 * 1024);
    let pods = v["pods"].as_array().unwrap();
    let names: Vec<&str> = pods
        .iter()
        .map(|p| p["podRef"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "web"], "only this node's pods, by name");
    assert_eq!(pods[0]["containers"], json!([]));
    assert!(pods[0].get("cpu").is_none());
    let web = &pods[1];
    assert_eq!(
        web["podRef"],
        json!({"name": "web", "namespace": "default", "uid": "uid-web"})
    );
    let app = &web["containers"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(app["startTime"], created("app"));
    assert_eq!(
        app["cpu"],
        json!({"time": "2024-12-04T08:15:00Z", "usageCoreNanoSeconds": 3 * S})
    );
    assert_eq!(
        app["memory"],
        json!({"time": "2024-12-04T08:15:00Z", "usageBytes": 11 * MIB, "workingSetBytes": 10 * MIB})
    );
    let names: Vec<&str> = web["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["app", "sidecar"],
        "the exited container is not counted"
    );
    assert_eq!(web["cpu"]["usageCoreNanoSeconds"], 4 * S);
    assert_eq!(web["memory"]["workingSetBytes"], 15 * MIB);
}

#[tokio::test]
async fn rates_are_the_agents_own_between_its_sample_and_now() {
    let f = fixture().await;
    f.stats.sample().await.unwrap();
    *f.fake.container_stats.lock().unwrap() = vec![
        usage(&f.fake, &f.ids["app"], T0 + 2 * S, 4_500_000_000, 10 * MIB),
        usage(
            &f.fake,
            &f.ids["sidecar"],
            T0 + 2 * S,
            1_200_000_000,
            5 * MIB,
        ),
    ];
    let v = serde_json::to_value(f.stats.collect().await.summary).unwrap();
    let web = &v["pods"][1];
    // 1.5 s and 0.2 s of CPU in 2 s; the runtime's own figure (42) is not used.
    assert_eq!(web["containers"][0]["cpu"]["usageNanoCores"], 750_000_000);
    assert_eq!(web["containers"][1]["cpu"]["usageNanoCores"], 100_000_000);
    assert_eq!(web["cpu"]["usageNanoCores"], 850_000_000);
    assert_eq!(web["cpu"]["time"], "2024-12-04T08:15:02Z");
}

#[tokio::test]
async fn a_pod_has_no_rate_while_one_of_its_containers_has_none() {
    let f = fixture().await;
    f.stats.sample().await.unwrap();
    // The sidecar's counter went back: a new process, no rate from it yet.
    *f.fake.container_stats.lock().unwrap() = vec![
        usage(&f.fake, &f.ids["app"], T0 + 2 * S, 4 * S as u64, 10 * MIB),
        usage(&f.fake, &f.ids["sidecar"], T0 + 2 * S, 1000, 5 * MIB),
    ];
    let v = serde_json::to_value(f.stats.collect().await.summary).unwrap();
    let web = &v["pods"][1];
    assert_eq!(web["containers"][0]["cpu"]["usageNanoCores"], 500_000_000);
    assert!(web["containers"][1]["cpu"].get("usageNanoCores").is_none());
    assert!(web["cpu"].get("usageNanoCores").is_none());
    assert_eq!(web["cpu"]["usageCoreNanoSeconds"], 4 * S + 1000);
}

#[test]
fn node_rate_from_the_sample_before() {
    let mut h = History::default();
    h.record_node(Sample {
        at_ns: T0 - 10 * S,
        usage_ns: 0,
    });
    let reading = NodeReading {
        at_ns: T0,
        boot_ns: None,
        cpu_ns: Some(15 * S as u64),
        memory: None,
    };
    let node = serde_json::to_value(node_stats("n1", &reading, &h)).unwrap();
    assert_eq!(
        node,
        json!({"nodeName": "n1", "cpu": {"time": "2024-12-04T08:15:00Z", "usageNanoCores": 1_500_000_000u64, "usageCoreNanoSeconds": 15 * S}})
    );
}

#[tokio::test]
async fn a_failing_runtime_is_reported_with_the_nodes_own_stats() {
    let f = fixture().await;
    f.fake
        .container_stats_fail
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let collected = f.stats.collect().await;
    assert!(collected
        .error
        .unwrap()
        .to_string()
        .contains("ListContainerStats"));
    let v: Value = serde_json::to_value(collected.summary).unwrap();
    assert_eq!(v["pods"], json!([]));
    assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 15 * S);
}

/// A pod's network comes from its sandbox's stats (the runtime's view of the pod's eth0).
#[tokio::test]
async fn pod_network_from_sandbox_stats() {
    let f = fixture().await;
    let web = f
        .fake
        .list_pod_sandbox(HashMap::from([(
            labels::POD_NAME.to_string(),
            "web".to_string(),
        )]))
        .await
        .unwrap();
    let counters = |name: &str, rx: u64, tx: u64| cri::NetworkInterfaceUsage {
        name: name.into(),
        rx_bytes: Some(cri::UInt64Value { value: rx }),
        tx_bytes: Some(cri::UInt64Value { value: tx }),
        ..Default::default()
    };
    *f.fake.pod_sandbox_stats.lock().unwrap() = vec![cri::PodSandboxStats {
        attributes: Some(cri::PodSandboxAttributes {
            id: web[0].id.clone(),
            labels: web[0].labels.clone(),
            ..Default::default()
        }),
        linux: Some(cri::LinuxPodSandboxStats {
            network: Some(cri::NetworkUsage {
                timestamp: T0,
                default_interface: Some(counters("eth0", 1000, 2000)),
                interfaces: vec![counters("net1", 5, 6)],
            }),
            ..Default::default()
        }),
        windows: None,
    }];
    let v = serde_json::to_value(f.stats.collect().await.summary).unwrap();
    let pods = v["pods"].as_array().unwrap();
    let web = pods.iter().find(|p| p["podRef"]["name"] == "web").unwrap();
    assert_eq!(web["network"]["name"], "eth0");
    assert_eq!(
        (
            web["network"]["rxBytes"].as_u64(),
            web["network"]["txBytes"].as_u64()
        ),
        (Some(1000), Some(2000))
    );
    let names: Vec<&str> = web["network"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["eth0", "net1"]);
    let api = pods.iter().find(|p| p["podRef"]["name"] == "api").unwrap();
    assert!(
        api.get("network").is_none(),
        "no sandbox stats, no network: {api}"
    );
}
