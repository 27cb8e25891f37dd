//! keelson-proxy against an API server Keelson did not write: kmock's emulator (PyPI `kmock`),
//! which sends no resourceVersions, no bookmarks, and ignores selectors. The proxy must render
//! its rules from the Services and EndpointSlices there, follow changes (by relisting, as a watch
//! cannot resume), and keep its own Node's addresses apart from other nodes'. Checked with real
//! connections from a client test host, in nftables mode.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use common::{tcp_hits, Hosts, Servers, NODE_IP, POD_IPS};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_testing::process::wait_until;
use keelson_testing::{free_port, ChildGuard, Kmock};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const CLUSTER_IP: &str = "10.96.0.50";

fn slice(ready: [bool; 2]) -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [POD_IPS[0]], "nodeName": "node", "conditions": {"ready": ready[0]}},
            {"addresses": [POD_IPS[1]], "nodeName": "node", "conditions": {"ready": ready[1]}}
        ]
    }))
    .expect("slice")
}

fn node(name: &str, ip: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    }))
    .expect("node")
}

fn wait(what: &str, limit: Duration, check: impl FnMut() -> bool) {
    tokio::task::block_in_place(|| wait_until(what, limit, check));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_renders_rules_from_kmocks_objects_and_follows_changes() {
    let hosts = Hosts::new();
    let _servers = [
        Servers::start(&hosts.pods[0], "pod1", &[8080], &[]),
        Servers::start(&hosts.pods[1], "pod2", &[8080], &[]),
    ];
    let kmock = Kmock::start(&[
        "v1/services",
        "discovery.k8s.io/v1/endpointslices",
        "v1/nodes",
    ]);
    let client = kmock.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    // Another node, first in name order: the emulator ignores the proxy's field selector.
    for n in [node("another", "192.168.99.9"), node("node", NODE_IP)] {
        nodes
            .create(&PostParams::default(), &n)
            .await
            .expect("node");
    }
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "NodePort", "clusterIP": CLUSTER_IP, "clusterIPs": [CLUSTER_IP],
                 "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http",
                            "protocol": "TCP", "nodePort": 30080}]}
    }))
    .expect("service");
    svcs.create(&PostParams::default(), &svc)
        .await
        .expect("create service");
    slices
        .create(&PostParams::default(), &slice([true, true]))
        .await
        .expect("create slice");

    let metrics_port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keelson-proxy"));
    cmd.arg("--kubeconfig")
        .arg(kmock.kubeconfig())
        .args(["--hostname-override", "node", "--proxy-mode", "nftables"])
        .args([
            "--cluster-cidr",
            "10.244.0.0/16",
            "--min-sync-period",
            "200ms",
        ])
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .arg("--netns")
        .arg(hosts.node.path());
    let log = kmock.dir.path().join("proxy.log");
    let _proxy = ChildGuard::spawn_logged(&mut cmd, &log);
    let proxy_log = || std::fs::read_to_string(&log).unwrap_or_default();

    let cluster_ip: SocketAddr = format!("{CLUSTER_IP}:80").parse().expect("addr");
    let node_port: SocketAddr = format!("{NODE_IP}:30080").parse().expect("addr");
    wait(
        "both pods behind the ClusterIP",
        Duration::from_secs(20),
        || {
            let hits = tcp_hits(&hosts.client, cluster_ip, 40);
            hits.contains_key("pod1") && hits.contains_key("pod2")
        },
    );
    // The NodePort is on this node's address (from node2, beside it), not the other node's.
    wait(
        "the NodePort on the node's address",
        Duration::from_secs(5),
        || {
            tcp_hits(&hosts.node2, node_port, 4)
                .keys()
                .any(|k| k.starts_with("pod"))
        },
    );
    let rules = hosts.node.sh_ok("nft list ruleset");
    assert!(
        !rules.contains("192.168.99.9"),
        "another node's address in the rules:\n{rules}"
    );

    // A change arrives without a resourceVersion: the proxy relists and follows it.
    slices
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(&slice([true, false])),
        )
        .await
        .expect("patch slice");
    wait("the unready pod removed", Duration::from_secs(15), || {
        tcp_hits(&hosts.client, cluster_ip, 20).get("pod1") == Some(&20)
    });
    assert!(
        proxy_log().contains("without metadata.resourceVersion"),
        "the proxy does not say why it relists:\n{}",
        proxy_log()
    );

    svcs.delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    wait(
        "the deleted Service's rules removed",
        Duration::from_secs(15),
        || {
            tcp_hits(&hosts.client, cluster_ip, 1)
                .keys()
                .all(|k| k.starts_with("error"))
        },
    );
}
