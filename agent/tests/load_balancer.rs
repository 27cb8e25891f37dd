//! `keelson-agent load-balancer` in front of two API servers of one cluster on one etcd: kubectl
//! and a kube-rs client pointed at it keep working when the server they use is killed, see what
//! was written through it before, and a watch through it goes on delivering events from the
//! other server. It serves /healthz on --metrics-bind-address and stops cleanly on SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use keelson_testing::{binary, eventually, free_port, Apiserver, ChildGuard, Etcd, Kubectl};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

/// A running `keelson-agent load-balancer` (killed on drop) and its log.
struct LoadBalancer {
    child: ChildGuard,
    port: u16,
    metrics_port: u16,
    log: PathBuf,
}

impl LoadBalancer {
    fn start(servers: &[&Apiserver], dir: &Path) -> LoadBalancer {
        let (port, metrics_port) = (free_port(), free_port());
        let endpoints: Vec<String> = servers.iter().map(|s| s.url("")).collect();
        let log = dir.join("load-balancer.log");
        let mut cmd = Command::new(binary("keelson-agent"));
        cmd.arg("load-balancer")
            .args(["--apiserver-endpoints", &endpoints.join(",")])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--health-check-interval", "200ms"])
            .args([
                "--metrics-bind-address",
                &format!("127.0.0.1:{metrics_port}"),
            ]);
        let child = ChildGuard::spawn_logged(&mut cmd, &log);
        let lb = LoadBalancer {
            child,
            port,
            metrics_port,
            log,
        };
        eventually(
            "the load balancer to listen",
            Duration::from_secs(10),
            || {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map_err(|e| format!("{e}; log:\n{}", lb.log()))
            },
        );
        lb
    }

    /// The status line of a plain HTTP GET on --metrics-bind-address.
    fn get(&self, path: &str) -> Result<String, String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port))
            .map_err(|e| e.to_string())?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| e.to_string())?;
        Ok(text.lines().next().unwrap_or_default().to_string())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `server`'s admin kubeconfig with the balancer as the server.
    fn kubeconfig(&self, server: &Apiserver, dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(server.kubeconfig()).expect("admin kubeconfig");
        let ours = format!("https://127.0.0.1:{}", self.port);
        assert!(text.contains(&server.url("")), "{text}");
        let path = dir.join("load-balancer.kubeconfig");
        std::fs::write(&path, text.replace(&server.url(""), &ours)).expect("write kubeconfig");
        path
    }
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(
        serde_json::json!({ "metadata": { "name": name }, "data": { "k": "v" } }),
    )
    .expect("a ConfigMap")
}

/// Which server the balancer sends the client's connections to: the one whose request count
/// rises by the 50 requests sent (the other sees only health checks and this scrape).
async fn server_in_use(servers: &[&Apiserver], client: &kube::Client) -> usize {
    let count = |s: &Apiserver| s.metric("apiserver_request_total");
    let before: Vec<f64> = servers.iter().map(|s| count(s)).collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for _ in 0..50 {
        namespaces
            .get("default")
            .await
            .expect("get namespace default");
    }
    let rose: Vec<f64> = servers
        .iter()
        .zip(&before)
        .map(|(s, b)| count(s) - b)
        .collect();
    let in_use: Vec<usize> = (0..servers.len()).filter(|&i| rose[i] >= 50.0).collect();
    assert_eq!(in_use.len(), 1, "requests per server: {rose:?}");
    in_use[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_through_the_load_balancer_survive_the_loss_of_their_api_server() {
    let etcd = Etcd::start();
    let endpoints = etcd.endpoints();
    let store = ["--etcd-servers", endpoints.as_str()];
    let mut first = Apiserver::start_with(&store);
    let mut second = Apiserver::start_sharing(&first, &store);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let mut lb = LoadBalancer::start(&[&first, &second], scratch.path());
    let healthz = eventually("/healthz", Duration::from_secs(10), || lb.get("/healthz"));
    assert_eq!(healthz, "HTTP/1.1 200 OK", "log:\n{}", lb.log());
    let kubeconfig = lb.kubeconfig(&first, scratch.path());
    let kubectl = Kubectl::new(&kubeconfig);

    // kubectl verifies the server's certificate (127.0.0.1 is in both) with the shared CA.
    kubectl.ok(&["create", "namespace", "lb-before"]);
    let client = keelson_daemon::client(Some(&kubeconfig))
        .await
        .expect("a kube-rs client from the balancer's kubeconfig");
    let in_use = server_in_use(&[&first, &second], &client).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    let first_event = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
    assert!(matches!(first_event, Ok(Some(Ok(_)))), "{first_event:?}");

    // Kill the server the clients use; the balancer sends them to the other.
    let alive = if in_use == 0 {
        first.kill9();
        &second
    } else {
        second.kill9();
        &first
    };
    eventually(
        "kubectl through the balancer",
        Duration::from_secs(10),
        || kubectl.run(&["create", "namespace", "lb-after"]),
    );
    assert!(alive
        .kubectl(&["get", "namespace", "lb-after"])
        .status
        .success());
    // What was written through the dead server is there: both stored it in the one etcd.
    kubectl.ok(&["get", "namespace", "lb-before"]);

    // kube-rs: the pooled connection died with the server; the next requests go to the other.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let after =
        eventually_async(|| async { namespaces.get("lb-after").await.map_err(|e| e.to_string()) })
            .await;
    assert_eq!(after.metadata.name.as_deref(), Some("lb-after"));
    cms.create(&PostParams::default(), &configmap("lb-watched"))
        .await
        .expect("create a ConfigMap through the balancer after the failover");

    // The watch reconnects through the balancer and sees the write made after the failover.
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(ev) = events.next().await {
            let names: Vec<String> = match ev {
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                    o.metadata.name.into_iter().collect()
                }
                _ => Vec::new(),
            };
            if names.iter().any(|n| n == "lb-watched") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "load balancer log:\n{}", lb.log());

    let stopped = lb.child.terminate(Duration::from_secs(5));
    assert!(
        stopped.is_some_and(|s| s.success()),
        "SIGTERM: {stopped:?}; log:\n{}",
        lb.log()
    );
}

/// Retries `f` for 10 s (kube-rs does not retry a request whose connection died).
async fn eventually_async<T, F, Fut>(f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("after 10 s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
