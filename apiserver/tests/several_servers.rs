//! Several API servers of one cluster on one etcd: ClusterIPs and NodePorts handed out once
//! whichever server allocates them, and the `kubernetes` Service's endpoints listing every
//! server whose identity Lease is fresh.

use k8s_openapi::api::core::v1::Service;
use keelson_testing::{Apiserver, Etcd};
use kube::api::{Api, PostParams};
use std::collections::HashSet;
use std::time::Duration;

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

/// The addresses the `kubernetes` Endpoints list, as server `s` serves them, sorted.
fn kubernetes_endpoints(s: &Apiserver) -> Vec<String> {
    let (code, body) = s.curl_admin(
        "GET",
        "/api/v1/namespaces/default/endpoints/kubernetes",
        None,
        None,
    );
    if code != 200 {
        return Vec::new();
    }
    let ep: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut ips: Vec<String> = ep["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| Some(a["ip"].as_str()?.to_string()))
        .collect();
    ips.sort();
    ips
}

fn wait_endpoints(s: &Apiserver, want: &[&str], within: Duration) {
    keelson_testing::eventually("the kubernetes endpoints", within, || {
        let got = kubernetes_endpoints(s);
        match got == want {
            true => Ok(()),
            false => Err(format!("{got:?}, want {want:?}")),
        }
    });
}

#[test]
fn the_kubernetes_endpoints_list_every_server_whose_lease_is_fresh() {
    let etcd = Etcd::start();
    // Advertised addresses that are only written down (TEST-NET-1): the test reaches the
    // servers on 127.0.0.1 with curl and never uses their kubeconfigs, which name these.
    let endpoints = etcd.endpoints();
    let flags = |ip: &'static str| vec!["--etcd-servers", &endpoints, "--advertise-address", ip];
    let mut a = Apiserver::start_with(&flags("192.0.2.10"));
    let mut b = Apiserver::start_sharing(&a, &flags("192.0.2.11"));
    // Each server finds the other's lease at its next renewal (every 5 s).
    let both = ["192.0.2.10", "192.0.2.11"];
    wait_endpoints(&a, &both, Duration::from_secs(15));
    wait_endpoints(&b, &both, Duration::from_secs(15));
    let (_, body) = a.curl_admin(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver",
        None,
        None,
    );
    let leases: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(leases["items"].as_array().map(Vec::len), Some(2), "{body}");
    // A clean stop leaves at once; a server killed leaves once its lease is stale (15 s).
    b.stop();
    wait_endpoints(&a, &["192.0.2.10"], Duration::from_secs(5));
    b.start_again();
    wait_endpoints(&a, &both, Duration::from_secs(15));
    a.kill9();
    wait_endpoints(&b, &["192.0.2.11"], Duration::from_secs(30));
}
