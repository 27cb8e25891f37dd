//! End to end (root): keelson-apiserver, the keelson-proxy binary writing rules into a test
//! host, Services and EndpointSlices written through the API as the endpointslice controller
//! would, and real TCP connections from a client test host.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use common::{dump, hammer, tcp_hits, Hosts, Servers, POD_IPS};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_proxy::app::ProxyMode;
use keelson_testing::process::wait_until;
use keelson_testing::{free_port, Apiserver, ChildGuard, Component};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn slice(pod2_ready: bool) -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        // A named target port: each pod's number comes from the slice.
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [POD_IPS[0]], "nodeName": "node", "conditions": {"ready": true}},
            {"addresses": [POD_IPS[1]], "nodeName": "node", "conditions": {"ready": pod2_ready}}
        ]
    }))
    .expect("slice")
}

/// The proxy binary against `api` as system:kube-proxy, writing rules into the node test host; its log goes next to
/// the API server's.
fn start_proxy(api: &Apiserver, mode: ProxyMode, metrics_port: u16, hosts: &Hosts) -> ChildGuard {
    let mode = match mode {
        ProxyMode::Iptables => "iptables",
        ProxyMode::Nftables => "nftables",
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keelson-proxy"));
    cmd.arg("--kubeconfig")
        .arg(api.kubeconfig_of(Component::Proxy))
        .args(["--hostname-override", "node", "--proxy-mode", mode])
        .args(["--cluster-cidr", "10.244.0.0/16"])
        .args(["--min-sync-period", "200ms"])
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .arg("--netns")
        .arg(hosts.node.path());
    ChildGuard::spawn_logged(&mut cmd, &api.dir.path().join("proxy.log"))
}

/// A plain HTTP GET on the metrics port ("" when nothing answers yet).
fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `wait_until` off the async workers (the checks block on connections).
fn wait(what: &str, limit: Duration, check: impl FnMut() -> bool) {
    tokio::task::block_in_place(|| wait_until(what, limit, check));
}

async fn scenario(mode: ProxyMode) {
    let hosts = Hosts::new();
    let _servers = [
        Servers::start(&hosts.pods[0], "pod1", &[8080], &[]),
        Servers::start(&hosts.pods[1], "pod2", &[8080], &[]),
    ];
    let api = Apiserver::start();
    let client = api.client().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    }))
    .expect("service");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service");
    let cluster_ip = created
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("the apiserver allocates a cluster IP");
    assert!(
        cluster_ip.starts_with("10.96."),
        "client routes only 10.96.0.0/16, got {cluster_ip}"
    );
    slices
        .create(&PostParams::default(), &slice(true))
        .await
        .expect("create slice");

    let metrics_port = free_port();
    let proxy = start_proxy(&api, mode, metrics_port, &hosts);
    let target: SocketAddr = format!("{cluster_ip}:80").parse().expect("addr");
    wait("rules for the new Service", Duration::from_secs(15), || {
        let hits = tcp_hits(&hosts.client, target, 40);
        hits.contains_key("pod1") && hits.contains_key("pod2")
    });

    // pod2 turns unready: it stops getting new connections.
    slices
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(&slice(false)),
        )
        .await
        .expect("patch slice");
    wait("unready endpoint removed", Duration::from_secs(10), || {
        tcp_hits(&hosts.client, target, 20).get("pod1") == Some(&20)
    });

    // /healthz answers while syncs succeed.
    let health = tokio::task::block_in_place(|| get(metrics_port, "/healthz"));
    assert!(
        health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"),
        "{health}"
    );

    // A restarted proxy writes the same rules, and connections keep working meanwhile.
    let before = dump(&hosts.node, mode);
    let restart = || {
        drop(proxy);
        let metrics_port = free_port();
        let proxy = start_proxy(&api, mode, metrics_port, &hosts);
        wait_until("restarted proxy synced", Duration::from_secs(15), || {
            get(metrics_port, "/healthz").contains(" 200 ")
        });
        std::thread::sleep(Duration::from_millis(500));
        proxy
    };
    let (_proxy, ok, failed) =
        tokio::task::block_in_place(|| hammer(&hosts.client, target, restart));
    assert_eq!(
        dump(&hosts.node, mode),
        before,
        "the restart changed the rules"
    );
    assert!(
        ok > 5 && failed == 0,
        "during the restart: {ok} ok, {failed} failed"
    );

    // The Service goes away: so do its rules.
    svcs.delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    wait(
        "rules of the deleted Service removed",
        Duration::from_secs(10),
        || {
            tcp_hits(&hosts.client, target, 1)
                .keys()
                .all(|k| k.starts_with("error"))
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nftables_proxy_follows_the_api() {
    scenario(ProxyMode::Nftables).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iptables_proxy_follows_the_api() {
    scenario(ProxyMode::Iptables).await;
}
