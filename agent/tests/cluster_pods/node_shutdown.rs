//! Graceful node shutdown (--shutdown-grace-period) against a logind stand-in on a private
//! system bus: the agent holds a delay lock; on PrepareForShutdown the node turns NotReady, the
//! regular pod is stopped before the critical one, both are reported Failed (Terminated,
//! upstream's message, DisruptionTarget) before the lock is released, a new pod is refused
//! with NodeShutdown; a cancelled shutdown takes the lock again and the node is Ready.

use std::time::Duration;

use serde_json::Value;

use super::common::logind::{Bus, Logind};
use super::common::*;

const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// A pod that exits on SIGTERM after `linger` seconds, with a 10 s grace period.
fn pod(name: &str, node: &str, linger: u32, priority_class: Option<&str>) -> String {
    let class = priority_class.map_or(String::new(), |c| format!("  priorityClassName: {c}\n"));
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 10\n{class}  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, \"trap 'sleep {linger}; exit 0' TERM; while true; do sleep 1; done\"]\n"
    )
}

fn finished_at(pod: &Value) -> String {
    let state = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    state["finishedAt"].as_str().unwrap_or_default().to_string()
}

fn node_ready(cluster: &Cluster) -> (String, String) {
    let node = cluster
        .kubectl_json(&["get", "node", &cluster.node_name])
        .unwrap_or(Value::Null);
    let conditions = node["status"]["conditions"].as_array().cloned();
    let ready = conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c["type"] == "Ready")
        .unwrap_or(Value::Null);
    let text = |k: &str| ready[k].as_str().unwrap_or_default().to_string();
    (text("status"), text("message"))
}

#[test]
fn pods_stop_critical_last_before_the_node_shuts_down() {
    let mut cluster = Cluster::start("agshd");
    let node = cluster.node_name.clone();
    let bus = Bus::start(cluster.tmp.path());
    let logind = Logind::start(&bus, Duration::from_secs(60));
    cluster.stop_agent("TERM");
    let agent = cluster.node_mut(&node);
    agent.extra_args = [
        "--shutdown-grace-period",
        "20s",
        "--shutdown-grace-period-critical-pods",
        "5s",
    ]
    .map(String::from)
    .to_vec();
    agent.extra_env = vec![("DBUS_SYSTEM_BUS_ADDRESS".into(), bus.address.clone())];
    cluster.start_agent();
    cluster.wait_until(Duration::from_secs(30), "a delay lock held", || {
        (logind.delay_locks() == (1, 1)).then_some(())
    });

    cluster.apply(&pod("web", &node, 2, None));
    cluster.apply(&pod("dns", &node, 0, Some("system-node-critical")));
    for name in ["web", "dns"] {
        cluster.wait_until(Duration::from_secs(60), &format!("{name} Running"), || {
            (cluster.pod(name)["status"]["phase"] == "Running").then_some(())
        });
    }

    logind.prepare_for_shutdown(true);
    cluster.wait_until(
        Duration::from_secs(10),
        "Ready=False while shutting down",
        || {
            let (status, message) = node_ready(&cluster);
            (status == "False" && message.contains("node is shutting down")).then_some(())
        },
    );
    // The lock goes once both pods are stopped and reported, and not before.
    cluster.wait_until(Duration::from_secs(40), "the delay lock released", || {
        (logind.delay_locks() == (1, 0)).then_some(())
    });
    let (web, dns) = (cluster.pod("web"), cluster.pod("dns"));
    for pod in [&web, &dns] {
        let status = &pod["status"];
        assert_eq!(status["phase"], "Failed", "{pod}");
        assert_eq!(status["reason"], "Terminated", "{pod}");
        assert_eq!(status["message"], MESSAGE, "{pod}");
        let disruption = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "DisruptionTarget");
        assert_eq!(
            disruption.map(|c| c["reason"].clone()),
            Some("TerminationByKubelet".into()),
            "{pod}"
        );
    }
    // web lingers 2 s after SIGTERM; dns, critical, is told only once web has ended.
    assert!(
        finished_at(&dns) >= finished_at(&web),
        "dns ended at {} before web at {}",
        finished_at(&dns),
        finished_at(&web)
    );

    // A pod arriving now is refused.
    cluster.apply(&pod("late", &node, 0, None));
    let late = cluster.wait_until(Duration::from_secs(30), "late refused", || {
        let pod = cluster.pod("late");
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    assert_eq!(late["status"]["reason"], "NodeShutdown", "{late}");
    // The kubelet's rejectPod prefixes the admit handler's message.
    let refused = "Pod was rejected: Pod was rejected as the node is shutting down.";
    assert_eq!(late["status"]["message"], refused, "{late}");
    let metrics = cluster.metrics();
    let recorded = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let start = recorded("kubelet_graceful_shutdown_start_time_seconds");
    let end = recorded("kubelet_graceful_shutdown_end_time_seconds");
    assert!(
        start > 0.0 && end >= start,
        "start {start}, end {end}:\n{metrics}"
    );

    // Cancelled: the lock taken again, the node Ready, pods admitted again.
    logind.prepare_for_shutdown(false);
    cluster.wait_until(
        Duration::from_secs(20),
        "Ready again with a new lock",
        || {
            let ready = node_ready(&cluster).0 == "True";
            (ready && logind.delay_locks() == (2, 1)).then_some(())
        },
    );
    cluster.apply(&pod("after", &node, 0, None));
    cluster.wait_until(Duration::from_secs(60), "after Running", || {
        (cluster.pod("after")["status"]["phase"] == "Running").then_some(())
    });
    // Failed pods stay Failed.
    assert_eq!(cluster.pod("web")["status"]["phase"], "Failed");
}
