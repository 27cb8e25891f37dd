//! The QoS cgroup tree as the kubelet keeps it, read from the kernel's cgroup files (v1 here,
//! v2 in VMs): the node-level cgroup holds the pods to capacity less what is reserved,
//! BestEffort pods share the least CPU weight and Burstable ones their requests; each pod's
//! cgroup carries its requests and limits and holds its processes; a deleted pod's cgroup
//! goes, and so does one a pod that no longer exists left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::common::*;

const MOUNT: &str = "/sys/fs/cgroup";

fn v2() -> bool {
    Path::new(MOUNT).join("cgroup.controllers").is_file()
}

/// The folder of `rel` (a cgroup path) where `controller`'s files are.
fn dir(controller: &str, rel: &str) -> PathBuf {
    let rel = rel.trim_start_matches('/');
    if v2() {
        Path::new(MOUNT).join(rel)
    } else {
        Path::new(MOUNT).join(controller).join(rel)
    }
}

fn read(controller: &str, rel: &str, v1: &str, v2_file: &str) -> String {
    let file = dir(controller, rel).join(if v2() { v2_file } else { v1 });
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .to_string()
}

/// The CPU weight, as cpu.shares (v2's cpu.weight is compared converted as runc does).
fn cpu_weight(rel: &str) -> u64 {
    read("cpu", rel, "cpu.shares", "cpu.weight")
        .parse()
        .unwrap()
}

fn shares_as_read(shares: u64) -> u64 {
    if v2() {
        1 + (shares - 2) * 9999 / 262_142
    } else {
        shares
    }
}

/// The CFS quota in microseconds per 100 ms; None when unlimited.
fn cpu_quota(rel: &str) -> Option<i64> {
    let text = read("cpu", rel, "cpu.cfs_quota_us", "cpu.max");
    let quota = text.split_whitespace().next().unwrap_or_default();
    quota.parse().ok().filter(|q| *q > 0)
}

/// The memory limit; None when unlimited (v1 reports a huge number then).
fn memory_limit(rel: &str) -> Option<u64> {
    let text = read("memory", rel, "memory.limit_in_bytes", "memory.max");
    text.parse().ok().filter(|m| *m < 1 << 60)
}

/// Whether a process named `comm` runs in the cgroup `rel` or below it.
fn holds(rel: &str, comm: &str) -> bool {
    let mut dirs = vec![dir("memory", rel)];
    while let Some(d) = dirs.pop() {
        let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
        let named = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        };
        if procs.lines().any(named) {
            return true;
        }
        let children = std::fs::read_dir(&d).into_iter().flatten().flatten();
        dirs.extend(children.map(|e| e.path()).filter(|p| p.is_dir()));
    }
    false
}

fn sleeper(resources: &str) -> String {
    format!("  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n    resources: {resources}\n")
}

#[test]
fn pods_run_in_qos_cgroups_with_their_requests_and_limits() {
    let mut cluster = Cluster::start("agqos");
    let node = cluster.node_name.clone();
    cluster.stop_agent("TERM");
    cluster.node_mut(&node).extra_args = ["--kube-reserved", "cpu=500m,memory=512Mi"]
        .map(String::from)
        .to_vec();
    cluster.start_agent();
    let root = format!("/{node}");

    // The node-level cgroup: capacity less --kube-reserved (the kernel keeps whole pages).
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    let mem_total: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let pods_memory = (mem_total * 1024 - (512 << 20)) / 4096 * 4096;
    cluster.wait_until(Duration::from_secs(30), "node cgroup limits", || {
        (memory_limit(&root) == Some(pods_memory)).then_some(())
    });
    assert_eq!(
        cpu_weight(&root),
        shares_as_read((cpus * 1000 - 500) * 1024 / 1000)
    );
    assert_eq!(cpu_weight(&format!("{root}/besteffort")), shares_as_read(2));

    let guaranteed = "{limits: {cpu: 250m, memory: 64Mi}}";
    cluster.apply(&pod_yaml("gold", &node, &sleeper(guaranteed)));
    let burstable = "{requests: {cpu: 100m, memory: 16Mi}, limits: {memory: 32Mi}}";
    cluster.apply(&pod_yaml("silver", &node, &sleeper(burstable)));
    cluster.apply(&pod_yaml("bronze", &node, &sleeper("{}")));
    let mut uid = std::collections::BTreeMap::new();
    for name in ["gold", "silver", "bronze"] {
        let pod = cluster.wait_until(Duration::from_secs(60), &format!("{name} Running"), || {
            let pod = cluster.pod(name);
            (pod["status"]["phase"] == "Running").then_some(pod)
        });
        uid.insert(name, pod["metadata"]["uid"].as_str().unwrap().to_string());
    }

    // Guaranteed: in the node-level cgroup, bounded in CPU and memory by its limits.
    let gold = format!("{root}/pod{}", uid["gold"]);
    assert_eq!(cpu_weight(&gold), shares_as_read(256));
    assert_eq!(cpu_quota(&gold), Some(25_000));
    assert_eq!(memory_limit(&gold), Some(64 << 20));
    assert!(holds(&gold, "sleep"), "gold's process is not in {gold}");
    // Burstable: its CPU request as weight, no CPU quota (no container sets a CPU limit), its
    // memory limit; the Burstable cgroup weighs the Burstable pods' requests together.
    let silver = format!("{root}/burstable/pod{}", uid["silver"]);
    assert_eq!(cpu_weight(&silver), shares_as_read(102));
    assert_eq!(cpu_quota(&silver), None);
    assert_eq!(memory_limit(&silver), Some(32 << 20));
    assert!(
        holds(&silver, "sleep"),
        "silver's process is not in {silver}"
    );
    assert_eq!(
        cpu_weight(&format!("{root}/burstable")),
        shares_as_read(102)
    );
    // BestEffort: the least weight, no limits of its own.
    let bronze = format!("{root}/besteffort/pod{}", uid["bronze"]);
    assert_eq!(cpu_weight(&bronze), shares_as_read(2));
    assert_eq!(memory_limit(&bronze), None);
    assert!(
        holds(&bronze, "sleep"),
        "bronze's process is not in {bronze}"
    );

    // A deleted pod's cgroup goes with it, in every hierarchy.
    cluster
        .kubectl(&["delete", "pod", "gold", "--wait=true"])
        .unwrap();
    cluster.wait_until(Duration::from_secs(30), "gold's cgroup removed", || {
        (!dir("cpu", &gold).exists() && !dir("memory", &gold).exists()).then_some(())
    });
    // One left by a pod that no longer exists (an agent that died mid-teardown) is swept.
    let stale = format!("{root}/besteffort/pod00000000-0000-0000-0000-00000000dead");
    std::fs::create_dir_all(dir("memory", &stale)).unwrap();
    cluster.wait_until(Duration::from_secs(30), "the stale cgroup swept", || {
        (!dir("memory", &stale).exists()).then_some(())
    });
    assert!(
        dir("memory", &silver).exists(),
        "a running pod's cgroup was swept"
    );
    let log = cluster.agent_log();
    assert!(
        log.contains("removed the cgroup of a pod that is gone"),
        "{}",
        tail(&log, 20)
    );
}
