//! Node pressure as the kubelet's eviction manager handles it, on real cgroups: with allocatable
//! memory small (--kube-reserved), pods filling memory put the node under MemoryPressure; the
//! BestEffort pod using more than it requested is evicted, the Guaranteed one within its request
//! keeps running, a new BestEffort pod is refused while the pressure lasts, and the condition
//! clears after the transition period.

use std::time::Duration;

use super::common::*;

/// A pod writing `mi` MiB into a Memory emptyDir (charged to its cgroup), then sleeping.
fn filler(name: &str, node: &str, mi: u32, resources: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "  volumes: [{{name: mem, emptyDir: {{medium: Memory, sizeLimit: 400Mi}}}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'dd if=/dev/zero of=/mem/fill bs=1M count={mi}; sleep 3600']
    volumeMounts: [{{name: mem, mountPath: /mem}}]
    resources: {resources}
"
        ),
    )
}

fn condition(node: &serde_json::Value, kind: &str) -> serde_json::Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or_default()
}

#[test]
fn memory_pressure_evicts_the_best_effort_pod_before_the_guaranteed_one() {
    let mut cluster = Cluster::start("agprs");
    let node = cluster.node_name.clone();
    // Pods may use 400Mi together; the hard threshold (100Mi) is met past 300Mi.
    let total_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let reserved = format!("memory={}Ki", total_kib - 400 * 1024);
    cluster.stop_agent("TERM");
    cluster.node_mut(&node).extra_args = [
        "--kube-reserved",
        &reserved,
        "--eviction-hard",
        "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%",
        "--eviction-pressure-transition-period",
        "15s",
        "--housekeeping-interval",
        "1s",
    ]
    .map(String::from)
    .to_vec();
    cluster.start_agent();
    let allocatable = cluster.wait_until(Duration::from_secs(30), "allocatable memory", || {
        let n = cluster.kubectl_json(&["get", "node", &node]).ok()?;
        let m = n["status"]["allocatable"]["memory"].as_str()?.to_string();
        (m == "307200Ki").then_some(m)
    });
    assert_eq!(
        allocatable, "307200Ki",
        "400Mi less the 100Mi hard threshold"
    );

    let guaranteed = "{requests: {cpu: 100m, memory: 200Mi}, limits: {cpu: 100m, memory: 200Mi}}";
    cluster.apply(&filler("steady", &node, 80, guaranteed));
    cluster.wait_until(Duration::from_secs(60), "steady Running", || {
        (cluster.pod("steady")["status"]["phase"] == "Running").then_some(())
    });
    cluster.apply(&filler("greedy", &node, 250, "{}"));
    // The node reports the pressure (it stays for the 5s transition period once over).
    let pressure = cluster.wait_until(Duration::from_secs(90), "MemoryPressure True", || {
        let n = cluster.kubectl_json(&["get", "node", &node]).ok()?;
        let c = condition(&n, "MemoryPressure");
        (c["status"] == "True").then_some(c)
    });
    assert_eq!(
        pressure["reason"], "KubeletHasInsufficientMemory",
        "{pressure}"
    );

    let pod = cluster.wait_until(Duration::from_secs(90), "greedy Evicted", || {
        let pod = cluster.pod("greedy");
        (pod["status"]["reason"] == "Evicted").then_some(pod)
    });
    let message = pod["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
        ) && message.contains("Container app was using ")
            && message.ends_with("request is 0, has larger consumption of memory. "),
        "{message}"
    );
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
    // While the node reports the pressure, a new BestEffort pod is refused, as the kubelet does.
    cluster.apply(&filler("late", &node, 1, "{}"));
    let late = cluster.wait_until(Duration::from_secs(30), "late refused", || {
        let pod = cluster.pod("late");
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    assert_eq!(late["status"]["reason"], "Evicted", "{late}");
    assert_eq!(
        late["status"]["message"], "Pod was rejected: The node had condition: [MemoryPressure]. ",
        "{late}"
    );
    let events = cluster.pod_events("greedy");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Evicted: The node was low on resource: memory")),
        "{events:?}"
    );

    // The Guaranteed pod within its request stays; the pressure clears once memory is back.
    cluster.wait_until(Duration::from_secs(60), "MemoryPressure False", || {
        let n = cluster.kubectl_json(&["get", "node", &node]).ok()?;
        (condition(&n, "MemoryPressure")["status"] == "False").then_some(())
    });
    let steady = cluster.pod("steady");
    assert_eq!(steady["status"]["phase"], "Running", "{steady}");
    assert!(steady["status"]["reason"].is_null(), "{steady}");
    let log = cluster.agent_log();
    assert!(log.contains("node pressure changed"), "{}", tail(&log, 20));
}
