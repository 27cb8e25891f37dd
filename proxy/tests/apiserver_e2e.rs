//! End to end (root): keelson-apiserver, the keelson-proxy binary writing rules into a test
//! host, Services and EndpointSlices written through the API as the endpointslice controller
//! would, and real TCP connections from a client test host.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{tcp_hits, Hosts, Servers, POD_IPS};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Kills the child (by its pid) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn apiserver_binary() -> PathBuf {
    let path = std::env::var_os("KEELSON_APISERVER")
        .map(PathBuf::from)
        // Next to our own binary: the same target directory and profile.
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_BIN_EXE_keelson-proxy")).with_file_name("keelson-apiserver")
        });
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keelson-apiserver` (or set KEELSON_APISERVER)",
        path.display()
    );
    path
}

/// Starts an apiserver on a free port in 20000-29999 (binding port 0 is not supported).
fn start_apiserver(dir: &Path) -> (Proc, PathBuf) {
    let bin = apiserver_binary();
    for _ in 0..20 {
        let port = 20000 + rand::random::<u16>() % 10000;
        let log = std::fs::File::create(dir.join("apiserver.log")).expect("log file");
        let child = Command::new(&bin)
            .args([
                "--data-dir",
                &dir.display().to_string(),
                "--bind-address",
                "127.0.0.1",
            ])
            .args(["--secure-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start keelson-apiserver");
        let mut proc = Proc(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = proc.0.try_wait() {
                break; // port taken: try another
            }
            let kubeconfig = dir.join("admin.kubeconfig");
            if kubeconfig.exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (proc, kubeconfig);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(proc.0.kill());
    }
    panic!(
        "keelson-apiserver did not start; see {}",
        dir.join("apiserver.log").display()
    );
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let client = keelson_daemon::client(Some(kubeconfig))
        .await
        .expect("a client from the admin kubeconfig");
    // Wait for the API to answer.
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    for _ in 0..100 {
        if svcs.list(&Default::default()).await.is_ok() {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the apiserver does not answer lists");
}

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

async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if tokio::task::block_in_place(&mut check) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what}: not within {limit:?}");
}

fn start_proxy(
    dir: &Path,
    kubeconfig: &Path,
    mode: &str,
    metrics_port: u16,
    hosts: &Hosts,
) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("proxy.log"))
        .expect("log");
    Proc(
        Command::new(env!("CARGO_BIN_EXE_keelson-proxy"))
            .args(["--kubeconfig", &kubeconfig.display().to_string()])
            .args(["--hostname-override", "node", "--proxy-mode", mode])
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
            .args(["--netns", &hosts.node_path().display().to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start keelson-proxy"),
    )
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

fn dump(hosts: &Hosts, mode: &str) -> String {
    if mode == "iptables" {
        hosts
            .on_node(&["iptables-nft-save"])
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(" [").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        hosts.on_node(&["nft", "list", "table", "ip", "keelson"])
    }
}

async fn scenario(mode: &str) {
    let hosts = Hosts::new();
    let _servers = [
        Servers::start(&hosts.pods[0], "pod1", &[8080], &[]),
        Servers::start(&hosts.pods[1], "pod2", &[8080], &[]),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let (_api, kubeconfig) = start_apiserver(dir.path());
    let client = client(&kubeconfig).await;
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

    let metrics_port = 20000 + rand::random::<u16>() % 10000;
    let proxy = start_proxy(dir.path(), &kubeconfig, mode, metrics_port, &hosts);
    let target: SocketAddr = format!("{cluster_ip}:80").parse().expect("addr");
    let client_ns = hosts.client.clone();
    wait_until("rules for the new Service", Duration::from_secs(15), || {
        let hits = tcp_hits(&client_ns, target, 40);
        hits.contains_key("pod1") && hits.contains_key("pod2")
    })
    .await;

    // pod2 turns unready: it stops getting new connections.
    slices
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(&slice(false)),
        )
        .await
        .expect("patch slice");
    wait_until("unready endpoint removed", Duration::from_secs(10), || {
        tcp_hits(&client_ns, target, 20).get("pod1") == Some(&20)
    })
    .await;

    // /healthz answers while syncs succeed.
    let health = tokio::task::block_in_place(|| {
        let mut s =
            std::net::TcpStream::connect(("127.0.0.1", metrics_port)).expect("metrics port");
        use std::io::{Read, Write};
        let _ = s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    });
    assert!(
        health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"),
        "{health}"
    );

    // A restarted proxy writes the same rules, and connections keep working meanwhile.
    let before = dump(&hosts, mode);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s, ns) = (stop.clone(), client_ns.clone());
    let hammer = std::thread::spawn(move || {
        common::in_ns(&ns, move || {
            let (mut ok, mut failed) = (0, 0);
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                match common::tcp_once(target) {
                    Ok(_) => ok += 1,
                    Err(_) => failed += 1,
                }
            }
            (ok, failed)
        })
    });
    drop(proxy);
    let metrics_port = 20000 + rand::random::<u16>() % 10000;
    let _proxy = start_proxy(dir.path(), &kubeconfig, mode, metrics_port, &hosts);
    wait_until("restarted proxy synced", Duration::from_secs(15), || {
        get(metrics_port, "/healthz").contains(" 200 ")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, failed) = tokio::task::block_in_place(|| hammer.join().expect("hammer"));
    assert_eq!(dump(&hosts, mode), before, "the restart changed the rules");
    assert!(
        ok > 5 && failed == 0,
        "during the restart: {ok} ok, {failed} failed"
    );

    // The Service goes away: so do its rules.
    svcs.delete("web", &DeleteParams::default())
        .await
        .expect("delete service");
    wait_until(
        "rules of the deleted Service removed",
        Duration::from_secs(10),
        || {
            tcp_hits(&client_ns, target, 1)
                .keys()
                .all(|k| k.starts_with("error"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nftables_proxy_follows_the_api() {
    scenario("nftables").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iptables_proxy_follows_the_api() {
    scenario("iptables").await;
}
