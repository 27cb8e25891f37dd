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
    // No SNAT inside the cluster: the server sees the client pod's own address (the conflist's
    // nonMasqueradeCIDRs holds the cluster CIDR), not the first node's.
    assert!(
        logs.contains(&format!("GET /from-pod -> 200 from {here}\n")),
        "client pod {here} not seen as itself: {logs}"
    );
}

#[test]
fn a_node_without_pod_cidr_waits_for_node_ipam_then_gives_pods_addresses_from_spec() {
    let mut cluster = Cluster::start("agipam");
    let name = cluster.add_node_without_pod_cidr("agipamb");
    let condition = |node: &serde_json::Value| {
        node["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready").cloned())
    };
    // Registered with no pod CIDR: Ready=False saying what it waits for, no CNI configuration.
    let ready = cluster.wait_until(
        Duration::from_secs(30),
        "Ready=False waiting for spec.podCIDR",
        || {
            let node = cluster.kubectl_json(&["get", "node", &name]).ok()?;
            condition(&node).filter(|c| c["status"] == "False")
        },
    );
    assert_eq!(ready["reason"], "KubeletNotReady", "{ready}");
    let message = ready["message"].as_str().unwrap_or("");
    assert!(message.contains("waiting for spec.podCIDR"), "{message}");
    let node = cluster.kubectl_json(&["get", "node", &name]).expect("node");
    assert!(node["spec"]["podCIDR"].is_null(), "{}", node["spec"]);
    assert_eq!(cluster.node(&name).cni_conflist(), None);
    // The Lease is renewed meanwhile, so the node is not taken for gone.
    cluster
        .kubectl(&["get", "lease", "-n", "kube-node-lease", &name])
        .expect("the node's Lease while it waits");
    let log = cluster.node(&name).agent_log();
    assert!(
        log.contains("waiting for spec.podCIDR"),
        "{}",
        tail(&log, 20)
    );

    // What node IPAM does.
    let patch = r#"{"spec":{"podCIDR":"10.244.42.0/24","podCIDRs":["10.244.42.0/24"]}}"#;
    cluster
        .kubectl(&["patch", "node", &name, "--type=merge", "-p", patch])
        .expect("set spec.podCIDR");
    cluster.wait_until(Duration::from_secs(30), "Ready=True", || {
        let node = cluster.kubectl_json(&["get", "node", &name]).ok()?;
        condition(&node).filter(|c| c["status"] == "True")
    });
    let conflist = cluster
        .node(&name)
        .cni_conflist()
        .expect("CNI configuration");
    assert!(conflist.contains("10.244.42.0/24"), "{conflist}");
    cluster.apply(&http_pod("ipam", &name));
    let ip = ready_pod_ip(&cluster, "ipam", Duration::from_secs(60));
    assert!(
        ip.starts_with("10.244.42."),
        "pod IP {ip} not from spec.podCIDR"
    );
    let body = cluster
        .node(&name)
        .run("curl", &["-sS", "-m", "5", &format!("http://{ip}:8080/")])
        .expect("node to its pod");
    assert_eq!(body, "ipam\n");
}

#[test]
fn pods_on_two_nodes_reach_each_other_over_vxlan_and_a_deleted_node_is_forgotten() {
    let mut cluster = Cluster::start("agvx");
    let second = cluster.add_node("agvxb").name.clone();
    let first = cluster.node_name.clone();
    // Restarted with the vxlan backend: the host-gw routes of the first run are replaced.
    for name in [&first, &second] {
        let node = cluster.node_mut(name);
        node.stop_agent("TERM");
        node.extra_args = vec!["--network-backend".into(), "vxlan".into()];
        node.start_agent();
    }
    let mac = cluster.wait_until(
        Duration::from_secs(30),
        "the second node's VTEP MAC annotation",
        || {
            let node = cluster.kubectl_json(&["get", "node", &second]).ok()?;
            let annotations = &node["metadata"]["annotations"];
            (annotations["keelson.dev/backend-type"] == "vxlan")
                .then(|| {
                    annotations["keelson.dev/vxlan-vtep-mac"]
                        .as_str()
                        .map(str::to_string)
                })
                .flatten()
        },
    );
    let route = cluster.wait_until(
        Duration::from_secs(30),
        "a vxlan route to the second node's pods",
        || {
            cluster
                .on_node("ip", &["-4", "route", "show", "10.244.8.0/24"])
                .ok()
                .filter(|r| r.contains("dev keelson.1"))
        },
    );
    assert_eq!(
        route.trim(),
        "10.244.8.0/24 via 10.244.8.0 dev keelson.1 proto 252 onlink",
    );
    // Pods' interfaces fit the overlay: the uplink's 1500 minus 50.
    let conflist = cluster.node(&first).cni_conflist().expect("conflist");
    assert!(conflist.contains("\"mtu\": 1450"), "{conflist}");
    let neigh = cluster
        .on_node("ip", &["neigh", "show", "dev", "keelson.1"])
        .expect("neighbours");
    assert!(
        neigh.contains(&format!("10.244.8.0 lladdr {mac} PERMANENT")),
        "{neigh}"
    );
    let fdb = cluster
        .on_node("bridge", &["fdb", "show", "dev", "keelson.1"])
        .expect("fdb");
    assert!(
        fdb.contains(&format!("{mac} dst 172.31.255.3 self permanent")),
        "{fdb}"
    );

    cluster.apply(&http_pod("vx-here", &first));
    cluster.apply(&http_pod("vx-there", &second));
    let here = ready_pod_ip(&cluster, "vx-here", Duration::from_secs(60));
    let there = ready_pod_ip(&cluster, "vx-there", Duration::from_secs(60));
    let here_container = container_ids(&cluster.pod("vx-here"))["app"]
        .0
        .trim_start_matches("containerd://")
        .to_string();
    let url = format!("http://{there}:8080/over-vxlan");
    let out = cluster.exec(&here_container, &["timeout", "5", "wget", "-qO-", &url]);
    assert_eq!(
        (
            out.exit_code,
            String::from_utf8_lossy(&out.stdout).to_string()
        ),
        (0, "vx-there\n".to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let logs = cluster.kubectl(&["logs", "vx-there"]).expect("logs");
    assert!(
        logs.contains(&format!("GET /over-vxlan -> 200 from {here}\n")),
        "{logs}"
    );

    // The second Node deleted: its route, neighbour and FDB entry go from the first node.
    cluster
        .kubectl(&["delete", "node", &second])
        .expect("delete node");
    cluster.wait_until(Duration::from_secs(30), "the route removed", || {
        let r = cluster
            .on_node("ip", &["-4", "route", "show", "10.244.8.0/24"])
            .ok()?;
        r.trim().is_empty().then_some(())
    });
    let neigh = cluster
        .on_node("ip", &["neigh", "show", "dev", "keelson.1"])
        .expect("neighbours");
    assert!(!neigh.contains("10.244.8.0"), "{neigh}");
    let fdb = cluster
        .on_node("bridge", &["fdb", "show", "dev", "keelson.1"])
        .expect("fdb");
    assert!(!fdb.contains("172.31.255.3"), "{fdb}");
}
