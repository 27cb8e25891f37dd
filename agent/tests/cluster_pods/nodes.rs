//! Several nodes: routes between their pod CIDRs.

use std::time::Duration;

use super::common::*;
use super::{http_pod, ready_pod_ip};

#[test]
fn pods_on_two_nodes_reach_each_other_through_node_routes() {
    let mut cluster = Cluster::start("agtwo");
    let second = cluster.add_node("agtwob").name.clone();
    let first = cluster.node_name.clone();
    cluster.apply(&http_pod("here", &first));
    cluster.apply(&http_pod("there", &second));
    let here = ready_pod_ip(&cluster, "here", Duration::from_secs(60));
    let there = ready_pod_ip(&cluster, "there", Duration::from_secs(60));
    assert!(
        there.starts_with("10.244.8."),
        "second node's pod CIDR: {there}"
    );

    // Each agent routes the other node's pod CIDR via that node's InternalIP.
    let routes = cluster.wait_until(
        Duration::from_secs(20),
        "a route to the second node's pods",
        || {
            cluster
                .on_node("ip", &["-4", "route", "show", "10.244.8.0/24"])
                .ok()
                .filter(|r| r.contains("via 172.31.255.3"))
        },
    );
    assert!(routes.contains("proto 252"), "{routes}");

    // Pod to pod across nodes: wget inside the "here" container (CRI ExecSync) reaches "there".
    let here_container = container_ids(&cluster.pod("here"))["app"]
        .0
        .trim_start_matches("containerd://")
        .to_string();
    let url = format!("http://{there}:8080/from-pod");
    let out = cluster.exec(&here_container, &["timeout", "5", "wget", "-qO-", &url]);
    assert_eq!(
        (
            out.exit_code,
            String::from_utf8_lossy(&out.stdout).to_string()
        ),
        (0, "there\n".to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = cluster
        .on_node(
            "curl",
            &["-sS", "-m", "5", &format!("http://{there}:8080/from-node")],
        )
        .expect("node to a pod on the other node");
    assert_eq!(body, "there\n");
    let body = cluster
        .on_node("curl", &["-sS", "-m", "5", &format!("http://{here}:8080/")])
        .expect("node to its own pod");
    assert_eq!(body, "here\n");
    let logs = cluster
        .kubectl(&["logs", "there"])
        .expect("logs from the second node");
    assert!(
        logs.contains("GET /from-node -> 200") && logs.contains("GET /from-pod -> 200"),
        "{logs}"
    );
}
