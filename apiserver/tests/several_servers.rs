//! Several API servers of one cluster on one etcd: ClusterIPs and NodePorts handed out once
//! whichever server allocates them, and the `kubernetes` Service's endpoints listing every
//! server whose identity Lease is fresh.

use k8s_openapi::api::core::v1::Service;
use keelson_testing::{Apiserver, Etcd};
use kube::api::{Api, PostParams};
use std::collections::HashSet;

fn svc(name: &str, node_port: bool) -> Service {
    let kind = if node_port { "NodePort" } else { "ClusterIP" };
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "type": kind, "selector": { "app": name }, "ports": [{ "port": 80 }] },
    }))
    .unwrap()
}

/// Two servers on one etcd member with small ranges, so that allocations collide unless shared.
fn two_servers(etcd: &Etcd, extra: &[&str]) -> (Apiserver, Apiserver) {
    let endpoints = etcd.endpoints();
    let mut flags = vec!["--etcd-servers", &endpoints];
    flags.extend_from_slice(extra);
    let a = Apiserver::start_with(&flags);
    let b = Apiserver::start_sharing(&a, &flags);
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_creating_services_at_once_never_hand_out_one_address_or_port_twice() {
    let etcd = Etcd::start();
    // 62 addresses, the first the `kubernetes` Service's; 40 ports for 30 NodePort Services.
    let ranges = [
        "--service-cluster-ip-range",
        "10.96.0.0/26",
        "--service-node-port-range",
        "30000-30039",
    ];
    let (a, b) = two_servers(&etcd, &ranges);
    let apis: Vec<Api<Service>> = vec![
        Api::namespaced(a.client().await, "default"),
        Api::namespaced(b.client().await, "default"),
    ];
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let api = apis[i % 2].clone();
            tokio::spawn(async move {
                let name = format!("s{i}");
                api.create(&PostParams::default(), &svc(&name, i % 4 < 2))
                    .await
                    .map_err(|e| format!("{name}: {e}"))
            })
        })
        .collect();
    let (mut ips, mut ports) = (HashSet::new(), HashSet::new());
    for t in tasks {
        let s = t.await.unwrap().unwrap();
        let spec = s.spec.unwrap();
        let ip = spec.cluster_ip.unwrap();
        assert!(ips.insert(ip.clone()), "ClusterIP {ip} handed out twice");
        if let Some(p) = spec.ports.unwrap()[0].node_port {
            assert!(ports.insert(p), "NodePort {p} handed out twice");
        }
    }
    assert_eq!((ips.len(), ports.len()), (60, 30));
    assert!(
        !ips.contains("10.96.0.1"),
        "the kubernetes Service's address handed out"
    );
    // One address is left: the first create gets it, the next finds the range full, whichever
    // server it asks.
    apis[0]
        .create(&PostParams::default(), &svc("last", false))
        .await
        .unwrap();
    let err = apis[1]
        .create(&PostParams::default(), &svc("over", false))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no IP addresses left"), "{err}");
    // Freed through one server, allocated through the other.
    apis[0].delete("s0", &Default::default()).await.unwrap();
    apis[1]
        .create(&PostParams::default(), &svc("over", false))
        .await
        .unwrap();
}
