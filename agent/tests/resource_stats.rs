//! `/stats/summary` and `/metrics/resource` for a pod whose container burns a CPU: the
//! container's usageNanoCores agrees with the rate its own cgroup counted over the same ten
//! seconds, its CPU time lies between two readings of that cgroup, and the node, pod and
//! container have a working set. The real agent, containerd and keelson-apiserver (see
//! common/mod.rs).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The container's cumulative CPU time in ns, from the cgroup of a process of the container
/// (found by its id in /proc/<pid>/cgroup): cgroup v1's cpuacct.usage, or v2's cpu.stat.
struct CgroupCpu(PathBuf, bool);

impl CgroupCpu {
    fn find(container_id: &str) -> Option<CgroupCpu> {
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path().join("cgroup")) else {
                continue;
            };
            for line in text.lines().filter(|l| l.contains(container_id)) {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let path = path.trim_start_matches('/');
                if controllers.split(',').any(|c| c == "cpuacct") {
                    let file = PathBuf::from("/sys/fs/cgroup/cpuacct").join(path);
                    return Some(CgroupCpu(file.join("cpuacct.usage"), true));
                }
                if controllers.is_empty() && text.lines().count() == 1 {
                    let file = PathBuf::from("/sys/fs/cgroup").join(path).join("cpu.stat");
                    return Some(CgroupCpu(file, false));
                }
            }
        }
        None
    }

    fn usage_ns(&self) -> u64 {
        let text = std::fs::read_to_string(&self.0).expect("the container's cgroup CPU file");
        if self.1 {
            return text.trim().parse().expect("cpuacct.usage");
        }
        let usec: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.parse().ok())
            .expect("usage_usec in cpu.stat");
        usec * 1000
    }
}

fn get_json(cluster: &Cluster, path: &str) -> Option<Value> {
    let answer = cluster.agent_get(path, Some(&cluster.admin_token()));
    serde_json::from_str(answer.strip_suffix(" 200")?).ok()
}

fn pod_of<'a>(summary: &'a Value, name: &str) -> Option<&'a Value> {
    summary["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["name"] == name)
}

fn container_of<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

#[test]
fn summary_reports_a_busy_containers_rate_as_its_cgroup_counts_it() {
    let cluster = Cluster::start("agstat");
    let node = cluster.node_name.clone();
    let body = format!(
        "  containers:\n  - name: burn\n    image: {BUSYBOX}\n    command: [sh, -c, 'while :; do :; done']\n  - name: idle\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n"
    );
    cluster.apply(&pod_yaml("burner", &node, &body));
    let id = cluster.wait_until(Duration::from_secs(60), "burner running", || {
        let pod = cluster.pod("burner");
        let (id, _) = container_ids(&pod).remove("burn")?;
        let id = id.strip_prefix("containerd://")?.to_string();
        (pod["status"]["phase"] == "Running").then_some(id)
    });
    let cgroup = cluster.wait_until(Duration::from_secs(10), "the burner's cgroup", || {
        CgroupCpu::find(&id)
    });

    // The agent has a rate once its background sampler saw the container (every 10 s).
    cluster.wait_until(Duration::from_secs(30), "a rate for burn", || {
        let summary = get_json(&cluster, "/stats/summary");
        let rate = summary.as_ref().and_then(|s| {
            container_of(pod_of(s, "burner")?, "burn")?["cpu"]["usageNanoCores"].as_u64()
        });
        if rate.is_none() {
            std::thread::sleep(Duration::from_millis(500));
        }
        rate
    });

    let (t0, u0) = (Instant::now(), cgroup.usage_ns());
    std::thread::sleep(Duration::from_secs(10));
    let summary = get_json(&cluster, "/stats/summary").expect("the summary");
    let (t1, u1) = (Instant::now(), cgroup.usage_ns());
    let cgroup_rate = (u1 - u0) as f64 / (t1 - t0).as_nanos() as f64 * 1e9;

    let pod = pod_of(&summary, "burner").expect("burner in the summary");
    let burn = container_of(pod, "burn").expect("burn in the summary");
    let rate = burn["cpu"]["usageNanoCores"].as_u64().expect("a rate") as f64;
    assert!(
        (rate - cgroup_rate).abs() <= 0.2 * cgroup_rate,
        "agent {rate} nano cores, cgroup {cgroup_rate}: {burn}"
    );
    // The same counter: read by containerd between the test's two readings.
    let used = burn["cpu"]["usageCoreNanoSeconds"]
        .as_u64()
        .expect("CPU time");
    assert!(u0 <= used && used <= u1, "{u0} <= {used} <= {u1}");
    assert!(
        burn["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{burn}"
    );
    let idle = container_of(pod, "idle").expect("idle in the summary");
    let pod_used = pod["cpu"]["usageCoreNanoSeconds"].as_u64();
    assert_eq!(
        pod_used,
        Some(used + idle["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap_or(0))
    );
    assert_eq!(pod["podRef"]["namespace"], "default");
    assert!(pod["memory"]["workingSetBytes"].as_u64() > Some(0), "{pod}");
    // The pod's network from containerd's ListPodSandboxStats: its eth0 on the bridge.
    assert_eq!(pod["network"]["name"], "eth0", "{pod}");
    assert!(pod["network"]["rxBytes"].as_u64().is_some(), "{pod}");
    assert_eq!(summary["node"]["nodeName"], node.as_str());
    // The node runs at least the burner.
    let node_rate = summary["node"]["cpu"]["usageNanoCores"]
        .as_u64()
        .unwrap_or(0) as f64;
    assert!(node_rate >= 0.8 * cgroup_rate, "{}", summary["node"]);
    assert!(summary["node"]["memory"]["workingSetBytes"].as_u64() > Some(0));

    let answer = cluster.agent_get("/metrics/resource", Some(&cluster.admin_token()));
    let metrics = answer
        .strip_suffix(" 200")
        .expect("/metrics/resource answers");
    let series =
        r#"container_cpu_usage_seconds_total{container="burn",namespace="default",pod="burner"} "#;
    let line = metrics.lines().find(|l| l.starts_with(series));
    let seconds: Option<f64> = line.and_then(|l| l.split(' ').nth(1)?.parse().ok());
    assert!(seconds.is_some_and(|s| s * 1e9 >= u0 as f64), "{metrics}");
    assert!(metrics.lines().any(|l| l == "scrape_error 0"), "{metrics}");
    // Without a token nothing is read; a user needs nodes/stats and nodes/metrics.
    let anonymous = cluster.agent_get("/stats/summary", None);
    assert_eq!(anonymous, "Unauthorized 401");
    cluster
        .kubectl(&["create", "serviceaccount", "nobody"])
        .expect("serviceaccount");
    let token = cluster
        .kubectl(&["create", "token", "nobody"])
        .expect("a token");
    let stats = cluster.agent_get("/stats/summary", Some(token.trim()));
    assert!(stats.ends_with("subresource=stats) 403"), "{stats}");
    let metrics = cluster.agent_get("/metrics/resource", Some(token.trim()));
    assert!(metrics.ends_with("subresource=metrics) 403"), "{metrics}");
}
