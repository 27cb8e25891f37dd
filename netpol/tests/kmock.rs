//! keelson-netpol against an API server Keelson did not write: kmock's emulator (PyPI `kmock`).
//! kmock 0.8 cannot serve `/api/v1/namespaces` at all (its path parser takes "namespaces" for
//! the namespace segment and answers 500), and keelson-netpol needs Namespaces (their labels
//! decide namespaceSelectors). So this checks the other half of "joins any API server": with an
//! input it cannot list, keelson-netpol says which and what it needs, and writes no rule (a
//! partial view could open what policy closes), leaving the node's traffic as it was.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use keelson_testing::process::wait_until;
use keelson_testing::{free_port, require_root_and_tools, ChildGuard, Kmock, TestHost};
use kube::api::{Api, PostParams};
use serde_json::json;

const CLIENT_IP: &str = "10.244.0.10";
const SERVER_IP: &str = "10.244.0.11";

/// A pod's network: a test host on the node's bridge.
fn pod_host(node: &TestHost, name: &str, ip: &str) -> TestHost {
    let host = TestHost::create(&format!("npk-{name}"));
    let port = format!("v{name}");
    node.ip(&[
        "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &host.name,
    ]);
    node.ip(&["link", "set", &port, "master", "br0", "up"]);
    host.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
    host.ip(&["link", "set", "eth0", "up"]);
    host
}

fn pod(name: &str, ip: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "x", "labels": {"app": name}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                 "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    }))
    .expect("pod")
}

/// Ingress to the server from nowhere (when enforced).
fn policy() -> NetworkPolicy {
    let ingress = json!([]);
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "server-ingress", "namespace": "x"},
        "spec": {"podSelector": {"matchLabels": {"app": "server"}},
                 "policyTypes": ["Ingress"], "ingress": ingress}
    }))
    .expect("policy")
}

fn connects(from: &TestHost, to: SocketAddr) -> bool {
    from.run_in(move || TcpStream::connect_timeout(&to, Duration::from_millis(500)).is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netpol_says_what_it_cannot_list_and_writes_no_rule() {
    require_root_and_tools(&["ip", "nft"]);
    let node = TestHost::create("npk-node");
    node.sysctl("net.ipv4.ip_forward=1");
    node.ip(&["link", "add", "br0", "type", "bridge"]);
    node.ip(&["addr", "add", "10.244.0.1/24", "dev", "br0"]);
    node.ip(&["link", "set", "br0", "up"]);
    // Bridged pod-to-pod traffic passes the forward hook, as on a node with br_netfilter.
    node.sysctl("net.bridge.bridge-nf-call-iptables=1");
    let client = pod_host(&node, "client", CLIENT_IP);
    let server = pod_host(&node, "server", SERVER_IP);
    let listener = server.run_in(|| TcpListener::bind(("0.0.0.0", 80)).expect("bind"));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        while !stopped.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((s, _)) => drop(s),
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    let target: SocketAddr = format!("{SERVER_IP}:80").parse().expect("addr");
    assert!(
        connects(&client, target),
        "the pods do not connect without a policy"
    );

    let kmock = Kmock::start(&[
        "v1/pods",
        "v1/namespaces",
        "networking.k8s.io/v1/networkpolicies",
    ]);
    let kube = kmock.client().await;
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
    )
    .expect("namespace");
    let refused = Api::<Namespace>::all(kube.clone())
        .create(&PostParams::default(), &ns)
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 500),
        "kmock serves Namespaces now ({refused:?}): test the policies through it"
    );
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "x");
    for (name, ip) in [("client", CLIENT_IP), ("server", SERVER_IP)] {
        pods.create(&PostParams::default(), &pod(name, ip))
            .await
            .expect("pod");
    }
    Api::<NetworkPolicy>::namespaced(kube, "x")
        .create(&PostParams::default(), &policy())
        .await
        .expect("policy");

    let log = kmock.dir.path().join("netpol.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keelson-netpol"));
    cmd.arg("--kubeconfig")
        .arg(kmock.kubeconfig())
        .args(["--hostname-override", "n1"])
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("--netns")
        .arg(node.path());
    let _netpol = ChildGuard::spawn_logged(&mut cmd, &log);
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    tokio::task::block_in_place(|| {
        wait_until(
            "keelson-netpol saying what it waits for",
            Duration::from_secs(20),
            || text().contains("not_listed=Namespaces"),
        )
    });
    assert!(
        text().contains("writes no rule until it has listed Pods, Namespaces and NetworkPolicies"),
        "{}",
        text()
    );
    let tables = node.sh_ok("nft list tables");
    assert!(
        !tables.contains("keelson-netpol"),
        "rules written from a partial view:\n{tables}"
    );
    assert!(connects(&client, target), "the node's traffic changed");
    stop.store(true, Ordering::SeqCst);
}
