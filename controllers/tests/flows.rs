//! The controllers and the scheduler against a real keelson-apiserver, driven by kubectl; the
//! test plays the node agents by registering Nodes and reporting Pods Running and Ready.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A binary of the workspace, next to this test's own target directory.
fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    _procs: Vec<Proc>,
    /// --metrics-bind-address of the controller manager, then of the scheduler.
    metrics: Vec<String>,
}

/// The value of a counter in Prometheus text, 0 when absent.
fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a workspace binary with its output in `dir`/NAME.log.
fn spawn(dir: &std::path::Path, name: &str, args: &[&str]) -> Proc {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let child = Command::new(bin(name))
        .args(args)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Proc(child)
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("keelson-controllers-test")
            .tempdir()
            .unwrap();
        let port = free_port().to_string();
        let data = dir.path().to_str().unwrap().to_string();
        let mut procs = vec![spawn(
            dir.path(),
            "keelson-apiserver",
            &[
                "--data-dir",
                &data,
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &port,
            ],
        )];
        let kubeconfig = dir.path().join("admin.kubeconfig");
        let ready = || {
            Command::new("curl")
                .args([
                    "-sfk",
                    "-m",
                    "1",
                    &format!("https://127.0.0.1:{port}/readyz"),
                ])
                .output()
                .unwrap()
                .status
                .success()
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !kubeconfig.exists() || !ready() {
            assert!(Instant::now() < deadline, "apiserver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let kc = kubeconfig.to_str().unwrap();
        let mut metrics = Vec::new();
        for name in ["keelson-controller-manager", "keelson-scheduler"] {
            let addr = format!("127.0.0.1:{}", free_port());
            procs.push(spawn(
                dir.path(),
                name,
                &["--kubeconfig", kc, "--metrics-bind-address", &addr],
            ));
            metrics.push(addr);
        }
        Cluster {
            dir,
            _procs: procs,
            metrics,
        }
    }

    /// GET of `path` on the controller manager (0) or the scheduler (1); None until it answers.
    fn scrape(&self, which: usize, path: &str) -> Option<String> {
        let out = Command::new("curl")
            .args([
                "-sf",
                "-m",
                "2",
                &format!("http://{}{path}", self.metrics[which]),
            ])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.dir.path().join("admin.kubeconfig"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}\ncontroller log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("keelson-controller-manager.log"))
            .unwrap_or_default()
    }

    fn eventually(&self, what: &str, mut f: impl FnMut() -> bool) {
        // Generous: every step is a durable write, and fsync is slow while other tests build.
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "timed out waiting for {what}; controller log:\n{}",
            self.log()
        );
    }

    fn pods(&self, selector: &str) -> Vec<String> {
        self.ok(&["get", "pods", "-l", selector, "-o", "jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{end}{range .items[*]}{.metadata.name}{\"\\n\"}{end}"])
            .lines()
            .map(String::from)
            .collect()
    }

    /// What a node agent reports once a Pod's containers run and pass readiness.
    fn mark_ready(&self, selector: &str) {
        for (i, p) in self.pods(selector).iter().enumerate() {
            let status = format!(
                r#"{{"status":{{"phase":"Running","podIP":"10.244.0.{}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
                10 + i
            );
            self.ok(&[
                "patch",
                "pod",
                p,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status,
            ]);
        }
    }
}

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn deployment_to_ready_pods_endpoints_rollout_and_cascade() {
    let c = Cluster::start();
    c.ok(&[
        "apply",
        "-f",
        &example("deployment.yaml"),
        "-f",
        &example("service.yaml"),
    ]);
    c.eventually("3 pods from the deployment", || {
        c.pods("app=web").len() == 3
    });
    let owner = c.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.ownerReferences[0].kind}",
    ]);
    assert_eq!(owner, "ReplicaSet");
    c.mark_ready("app=web");
    c.ok(&["rollout", "status", "deployment/web", "--timeout=90s"]);
    let ready = c.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.status.readyReplicas}/{.status.availableReplicas}",
    ]);
    assert_eq!(ready, "3/3");

    // The Service's EndpointSlice lists the three ready Pods on the resolved named port.
    c.eventually("3 ready endpoints", || {
        let out = c.kubectl(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[0].ports[0].port} {.items[0].endpoints[*].conditions.ready}",
        ]);
        String::from_utf8_lossy(&out.stdout) == "8080 true true true"
    });

    // Scaling up and down.
    c.ok(&["scale", "deployment", "web", "--replicas=5"]);
    c.eventually("5 pods", || c.pods("app=web").len() == 5);
    c.ok(&["scale", "deployment", "web", "--replicas=2"]);
    c.eventually("2 pods", || c.pods("app=web").len() == 2);
    c.mark_ready("app=web");

    // A new image rolls to a new ReplicaSet as its Pods become ready; the old one goes to 0.
    c.ok(&[
        "set",
        "image",
        "deployment/web",
        "web=127.0.0.1:5000/keelson/podname-http:2",
    ]);
    c.eventually("two ReplicaSets", || {
        c.ok(&["get", "rs", "-o", "name"]).lines().count() == 2
    });
    c.eventually("the rollout to finish", || {
        c.mark_ready("app=web");
        let images = c.ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        ]);
        let st = c.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.status.updatedReplicas}/{.status.replicas}/{.status.availableReplicas}",
        ]);
        st == "2/2/2" && images.split(' ').all(|i| i.ends_with(":2"))
    });
    c.ok(&["rollout", "status", "deployment/web", "--timeout=90s"]);

    // Deleting the Deployment removes its ReplicaSets and Pods (garbage collector).
    c.ok(&["delete", "deployment", "web"]);
    c.eventually("ReplicaSets and Pods to be collected", || {
        c.ok(&["get", "rs", "-o", "name"]).is_empty()
            && c.ok(&["get", "pods", "-o", "name"]).is_empty()
    });
    // Deleting the Service removes its EndpointSlice.
    c.ok(&["delete", "service", "web"]);
    c.eventually("the EndpointSlice to be collected", || {
        c.ok(&["get", "endpointslices", "-o", "name"]).is_empty()
    });
}

#[test]
fn namespace_deletion_empties_then_removes_it() {
    let c = Cluster::start();
    c.ok(&["create", "namespace", "doomed"]);
    c.ok(&[
        "create",
        "configmap",
        "a",
        "-n",
        "doomed",
        "--from-literal=k=v",
    ]);
    c.ok(&[
        "create",
        "deployment",
        "d",
        "-n",
        "doomed",
        "--image=busybox",
    ]);
    c.eventually("the deployment's pod", || {
        c.ok(&["get", "pods", "-n", "doomed", "-o", "name"])
            .lines()
            .count()
            == 1
    });
    let out = c.ok(&["delete", "namespace", "doomed", "--timeout=90s"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(!c.kubectl(&["get", "namespace", "doomed"]).status.success());
}

fn node(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}}}\nstatus:\n  allocatable: {{cpu: '2', memory: 4Gi, pods: '110'}}\n  conditions: [{{type: Ready, status: 'True', reason: KubeletReady, message: ready}}]\n"
    )
}

#[test]
fn scheduler_spreads_replicas_and_explains_unschedulable_pods() {
    let c = Cluster::start();
    for n in ["node-a", "node-b", "node-c"] {
        let mut child = Command::new("kubectl")
            .args(["apply", "-f", "-"])
            .env("KUBECONFIG", c.dir.path().join("admin.kubeconfig"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), node(n).as_bytes()).unwrap();
        assert!(child.wait().unwrap().success());
    }
    // The scheduler has seen all three nodes once a pod pinned to the last one is bound (one
    // watch delivers nodes in order); only then is an even spread the right answer.
    c.ok(&[
        "run",
        "probe",
        "--image=busybox",
        "--overrides={\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"node-c\"}}}",
    ]);
    c.eventually("the probe pod bound to node-c", || {
        c.ok(&["get", "pod", "probe", "-o", "jsonpath={.spec.nodeName}"]) == "node-c"
    });
    c.ok(&[
        "create",
        "deployment",
        "spread",
        "--image=busybox",
        "--replicas=6",
    ]);
    c.eventually("6 pods bound to nodes", || {
        let nodes = c.ok(&[
            "get",
            "pods",
            "-l",
            "app=spread",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ]);
        nodes.split_whitespace().count() == 6
    });
    let nodes = c.ok(&[
        "get",
        "pods",
        "-l",
        "app=spread",
        "-o",
        "jsonpath={.items[*].spec.nodeName}",
    ]);
    // Both daemons say so on /metrics (and are healthy).
    for which in [0, 1] {
        assert_eq!(c.scrape(which, "/healthz").as_deref(), Some("ok"));
    }
    let bound = counter(
        &c.scrape(1, "/metrics").unwrap_or_default(),
        "scheduler_pods_bound_total",
    );
    assert!(bound >= 7.0, "scheduler_pods_bound_total {bound}");
    let reconciles = counter(
        &c.scrape(0, "/metrics").unwrap_or_default(),
        "keelson_controller_reconciles_total",
    );
    assert!(
        reconciles > 0.0,
        "keelson_controller_reconciles_total {reconciles}"
    );
    // Nothing was deleted and made again on the way (the collector once took brand-new
    // ReplicaSets for orphans): one ReplicaSet, and no Pod is terminating.
    assert_eq!(c.ok(&["get", "rs", "-o", "name"]).lines().count(), 1);
    let deleting = c.ok(&[
        "get",
        "pods",
        "-o",
        "jsonpath={.items[*].metadata.deletionTimestamp}",
    ]);
    assert_eq!(deleting, "", "pods being deleted");
    for n in ["node-a", "node-b", "node-c"] {
        assert_eq!(
            nodes.split_whitespace().filter(|x| *x == n).count(),
            2,
            "not spread evenly: {nodes}"
        );
    }
    let scheduled = c.ok(&[
        "get",
        "pods",
        "-l",
        "app=spread",
        "-o",
        "jsonpath={.items[0].status.conditions[?(@.type==\"PodScheduled\")].status}",
    ]);
    assert_eq!(scheduled, "True");
    c.ok(&[
        "run",
        "nowhere",
        "--image=busybox",
        "--overrides={\"spec\":{\"nodeSelector\":{\"disk\":\"nvme\"}}}",
    ]);
    c.eventually("the unschedulable condition", || {
        let msg = c.ok(&[
            "get",
            "pod",
            "nowhere",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ]);
        msg == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    });
    assert_eq!(
        c.ok(&["get", "pod", "nowhere", "-o", "jsonpath={.spec.nodeName}"]),
        ""
    );
}
