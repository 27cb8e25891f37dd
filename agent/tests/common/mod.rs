//! A one-node cluster in two test hosts: a "control plane" host running keelson-apiserver, and a
//! node host running containerd and keelson-agent (with keelson-cni), linked by a veth pair with
//! 172.31.255.0/30 addresses. kubectl runs inside the control-plane host. Everything is removed on
//! drop, and leftovers of crashed runs with the same prefix are removed first.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keelson_proto::runtime::v1 as cri;
use keelson_proto::testing::{
    cleanup_leftovers, require_root_and_tools, run, scripts_dir, Containerd, TestHost,
};
use serde_json::Value;

pub const CP_IP: &str = "172.31.255.1";
pub const NODE_IP: &str = "172.31.255.2";
pub const POD_CIDR: &str = "10.244.7.0/24";
pub const HTTP_IMAGE: &str = "127.0.0.1:5000/keelson/podname-http:1";
/// Written into pods' resolv.conf (dnsPolicy ClusterFirst); nothing answers there in tests.
pub const CLUSTER_DNS: &str = "10.96.0.10";
pub const BUSYBOX: &str = "127.0.0.1:5000/keelson/busybox:1.35";

fn target_bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/debug")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p {name})",
        path.display()
    );
    path
}

/// Joins a node host to the control plane's bridge with `ip`/24 on its side (link kv1).
fn link_node(cp: &TestHost, node: &TestHost, index: usize, ip: &str) {
    let cp_side = format!("kp{index}");
    run(Command::new("ip").args([
        "-n", &cp.name, "link", "add", &cp_side, "type", "veth", "peer", "name", "kv1", "netns",
        &node.name,
    ]))
    .expect("veth");
    run(Command::new("ip").args([
        "-n", &cp.name, "link", "set", &cp_side, "master", "kbr", "up",
    ]))
    .expect("attach");
    run(Command::new("ip").args([
        "-n",
        &node.name,
        "addr",
        "add",
        &format!("{ip}/24"),
        "dev",
        "kv1",
    ]))
    .expect("addr");
    run(Command::new("ip").args(["-n", &node.name, "link", "set", "kv1", "up"])).expect("up");
}

/// How a keelson-agent is started for one node.
struct AgentSpec<'a> {
    host: &'a TestHost,
    name: &'a str,
    socket: &'a Path,
    ip: &'a str,
    pod_cidr: &'a str,
    dir: &'a Path,
    kubeconfig: &'a Path,
    log: &'a Path,
}

fn spawn_agent(a: &AgentSpec<'_>) -> ChildGuard {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(a.log)
        .expect("agent log");
    Command::new("nsenter")
        .arg(format!("--net={}", a.host.netns_path()))
        .arg(env!("CARGO_BIN_EXE_keelson-agent"))
        .args(["--kubeconfig", &a.kubeconfig.to_string_lossy()])
        .args(["--hostname-override", a.name])
        .args(["--container-runtime-endpoint", &a.socket.to_string_lossy()])
        .args(["--node-ip", a.ip, "--pod-cidr", a.pod_cidr])
        .args(["--cni-conf-dir", &a.dir.join("net.d").to_string_lossy()])
        .args(["--root-dir", &a.dir.join("agent-root").to_string_lossy()])
        .args(["--pod-log-dir", &a.dir.join("pod-logs").to_string_lossy()])
        .args(["--cgroup-root", &format!("/{}", a.name)])
        .args(["--cluster-dns", CLUSTER_DNS])
        .arg("--cni-portmap")
        // Small, so that a test sees rotation within seconds.
        .args([
            "--container-log-max-size",
            "64Ki",
            "--container-log-max-files",
            "3",
        ])
        .env("RUST_LOG", "keelson_agent=debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map(ChildGuard)
        .expect("start keelson-agent")
}

/// A further node: its own test host, containerd and agent.
pub struct ExtraNode {
    pub name: String,
    pub ip: String,
    pub pod_cidr: String,
    pub socket: PathBuf,
    agent: Option<ChildGuard>,
    containerd: Option<Containerd>,
    pub host: TestHost,
}

impl Drop for ExtraNode {
    fn drop(&mut self) {
        self.agent.take();
        remove_all_sandboxes(self.socket.clone());
        self.containerd.take();
        let _ = std::fs::remove_dir_all(ipam_dir(&self.name));
    }
}

pub struct Cluster {
    pub node_name: String,
    pub cp: TestHost,
    pub node: TestHost,
    pub tmp: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub socket: PathBuf,
    api: Option<ChildGuard>,
    agent: Option<ChildGuard>,
    containerd: Option<Containerd>,
    agent_log: PathBuf,
    cni_bin: PathBuf,
    pub extra: Vec<ExtraNode>,
}

impl Cluster {
    pub fn start(prefix: &str) -> Cluster {
        require_root_and_tools(&[
            "containerd",
            "runc",
            "skopeo",
            "docker-registry",
            "nsenter",
            "ip",
            "curl",
            "kubectl",
            "iptables",
        ]);
        cleanup_leftovers(prefix);
        cleanup_leftovers(&format!("{prefix}c"));
        let apiserver = target_bin("keelson-apiserver");
        let cni = target_bin("keelson-cni");
        let cp = TestHost::create(&format!("{prefix}c")).expect("control-plane test host");
        let node = TestHost::create(prefix).expect("node test host");
        let node_name = node.name.clone();
        // The control-plane host holds a bridge that every node's veth joins (172.31.255.0/24).
        run(Command::new("ip").args(["-n", &cp.name, "link", "add", "kbr", "type", "bridge"]))
            .expect("bridge");
        run(Command::new("ip").args([
            "-n",
            &cp.name,
            "addr",
            "add",
            &format!("{CP_IP}/24"),
            "dev",
            "kbr",
        ]))
        .expect("addr");
        run(Command::new("ip").args(["-n", &cp.name, "link", "set", "kbr", "up"])).expect("up");
        link_node(&cp, &node, 0, NODE_IP);

        let tmp = tempfile::tempdir().expect("tempdir");
        let bin = tmp.path().join("cni-bin");
        std::fs::create_dir_all(&bin).expect("cni bin dir");
        for name in ["keelson-cni", "keelson-ipam", "loopback"] {
            std::os::unix::fs::symlink(&cni, bin.join(name)).expect("cni symlink");
        }
        // hostPort mappings: Debian's portmap plugin, chained after keelson-cni.
        std::os::unix::fs::symlink("/usr/lib/cni/portmap", bin.join("portmap"))
            .expect("portmap symlink");
        let data = tmp.path().join("apiserver");
        let api_log = std::fs::File::create(tmp.path().join("apiserver.log")).expect("log");
        let api = Command::new("nsenter")
            .arg(format!("--net={}", cp.netns_path()))
            .arg(&apiserver)
            .args([
                "--data-dir",
                &data.to_string_lossy(),
                "--secure-port",
                "6443",
                "--advertise-address",
                CP_IP,
            ])
            .stdout(Stdio::null())
            .stderr(api_log)
            .spawn()
            .map(ChildGuard)
            .expect("start keelson-apiserver");
        let containerd = Containerd::start(&node, &bin, &tmp.path().join("net.d"))
            .expect("containerd in the node host");
        let socket = containerd.socket.clone();
        let mut cluster = Cluster {
            node_name,
            cp,
            node,
            kubeconfig: data.join("admin.kubeconfig"),
            socket,
            agent_log: tmp.path().join("agent.log"),
            tmp,
            api: Some(api),
            agent: None,
            containerd: Some(containerd),
            cni_bin: bin,
            extra: Vec::new(),
        };
        cluster.wait_until(Duration::from_secs(30), "apiserver /readyz", || {
            run(cluster.cp.command("curl").args([
                "-skf",
                "-m",
                "1",
                &format!("https://{CP_IP}:6443/readyz"),
            ]))
            .ok()
            .filter(|_| cluster.kubeconfig.exists())
        });
        cluster.start_agent();
        cluster.wait_until(Duration::from_secs(30), "node Ready", || {
            let node = cluster
                .kubectl_json(&["get", "node", &cluster.node_name])
                .ok()?;
            let ready = node["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(())
        });
        cluster
    }

    pub fn start_agent(&mut self) {
        assert!(self.agent.is_none(), "agent already running");
        let dir = self.tmp.path().to_path_buf();
        self.agent = Some(spawn_agent(&AgentSpec {
            host: &self.node,
            name: &self.node_name,
            socket: &self.socket,
            ip: NODE_IP,
            pod_cidr: POD_CIDR,
            dir: &dir,
            kubeconfig: &self.kubeconfig,
            log: &self.agent_log,
        }));
    }

    /// Stops containerd (its containers keep running in their shims) and starts it again.
    pub fn restart_containerd(&self) {
        let name = self.node.name.clone();
        run(Command::new(scripts_dir().join("containerd/stop")).arg(&name))
            .expect("stop containerd");
        run(Command::new(scripts_dir().join("containerd/start")).args([
            name.as_str(),
            "--netns",
            &self.node.name,
            "--cni-bin-dir",
            &self.cni_bin.to_string_lossy(),
            "--cni-conf-dir",
            &self.tmp.path().join("net.d").to_string_lossy(),
        ]))
        .expect("start containerd again");
    }

    /// Adds node number `extra.len() + 1` (address 172.31.255.3, .4, ...; pod CIDR
    /// 10.244.8.0/24, 10.244.9.0/24, ...) and waits until it is Ready.
    pub fn add_node(&mut self, prefix: &str) -> &ExtraNode {
        let index = self.extra.len() + 1;
        cleanup_leftovers(prefix);
        let host = TestHost::create(prefix).expect("node test host");
        let ip = format!("172.31.255.{}", 2 + index);
        let pod_cidr = format!("10.244.{}.0/24", 7 + index);
        link_node(&self.cp, &host, index, &ip);
        let dir = self.tmp.path().join(format!("node{index}"));
        let containerd = Containerd::start(&host, &self.cni_bin, &dir.join("net.d"))
            .expect("containerd in the node host");
        let name = host.name.clone();
        let agent = spawn_agent(&AgentSpec {
            host: &host,
            name: &name,
            socket: &containerd.socket,
            ip: &ip,
            pod_cidr: &pod_cidr,
            dir: &dir,
            kubeconfig: &self.kubeconfig,
            log: &self.tmp.path().join(format!("agent{index}.log")),
        });
        self.extra.push(ExtraNode {
            name: name.clone(),
            ip,
            pod_cidr,
            socket: containerd.socket.clone(),
            agent: Some(agent),
            containerd: Some(containerd),
            host,
        });
        self.wait_until(Duration::from_secs(30), "the added node Ready", || {
            let node = self.kubectl_json(&["get", "node", &name]).ok()?;
            let ready = node["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(())
        });
        self.extra.last().expect("just added")
    }

    /// Stops the agent with a signal ("TERM" or "KILL") and waits for it to exit.
    pub fn stop_agent(&mut self, signal: &str) {
        if let Some(mut child) = self.agent.take() {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), &child.0.id().to_string()])
                .status();
            let _ = child.0.wait();
        }
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(&self.agent_log).unwrap_or_default()
    }

    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        run(self
            .cp
            .command("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args))
    }

    pub fn kubectl_json(&self, args: &[&str]) -> Result<Value, String> {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.kubectl(&all)?;
        serde_json::from_str(&out).map_err(|e| format!("kubectl output is not JSON: {e}: {out}"))
    }

    pub fn apply(&self, yaml: &str) {
        let path = self.tmp.path().join(format!(
            "apply-{}.yaml",
            keelson_proto::testing::random_suffix()
        ));
        std::fs::write(&path, yaml).expect("write manifest");
        self.kubectl(&["apply", "-f", &path.to_string_lossy()])
            .expect("kubectl apply");
    }

    pub fn pod(&self, name: &str) -> Value {
        self.kubectl_json(&["get", "pod", name])
            .unwrap_or(Value::Null)
    }

    /// Polls `check` every 200 ms until it returns Some, or fails the test naming `what`.
    pub fn wait_until<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut() -> Option<T>,
    ) -> T {
        // Budgets are for a quiet machine; CI shares two cores with every other component's
        // tests, so they stretch (KEELSON_TEST_TIMEOUT_FACTOR, default 3). Passing tests never wait.
        let factor: u32 = std::env::var("KEELSON_TEST_TIMEOUT_FACTOR")
            .ok()
            .and_then(|f| f.parse().ok())
            .unwrap_or(3);
        let timeout = timeout * factor.max(1);
        let start = Instant::now();
        loop {
            if let Some(v) = check() {
                return v;
            }
            if start.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}\n--- agent log (tail) ---\n{}",
                    tail(&self.agent_log(), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs a command inside the node test host.
    pub fn on_node(&self, program: &str, args: &[&str]) -> Result<String, String> {
        run(self.node.command(program).args(args))
    }

    /// The pod sandboxes and containers containerd holds.
    pub fn runtime_state(&self) -> (Vec<cri::PodSandbox>, Vec<cri::Container>) {
        let socket = self.socket.clone();
        block_on(async move {
            let channel = keelson_proto::connect_unix(&socket)
                .await
                .expect("connect to containerd");
            let mut rt = keelson_proto::RuntimeServiceClient::new(channel);
            let sandboxes = rt
                .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
                .await
                .expect("ListPodSandbox")
                .into_inner()
                .items;
            let containers = rt
                .list_containers(cri::ListContainersRequest { filter: None })
                .await
                .expect("ListContainers")
                .into_inner()
                .containers;
            (sandboxes, containers)
        })
    }

    /// Addresses the node's IPAM has handed out (files named by IP under its data directory).
    pub fn allocated_addresses(&self) -> Vec<String> {
        let dir = ipam_dir(&self.node_name);
        let mut found = Vec::new();
        for entry in walk(&dir) {
            let name = entry
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.parse::<std::net::Ipv4Addr>().is_ok() {
                found.push(name);
            }
        }
        found
    }

    /// The pod's log files for a container on the first node (current and rotated).
    pub fn log_files(&self, pod: &Value, container: &str) -> Vec<PathBuf> {
        let m = &pod["metadata"];
        let dir = self.tmp.path().join("pod-logs").join(format!(
            "{}_{}_{}",
            m["namespace"].as_str().unwrap_or(""),
            m["name"].as_str().unwrap_or(""),
            m["uid"].as_str().unwrap_or("")
        ));
        walk(&dir.join(container))
    }

    /// Watches a pod with `kubectl get -w` and returns, for each change of the JSONPath
    /// `template`, the value and when it arrived; until `done` accepts a value or `timeout`.
    pub fn watch_pod(
        &self,
        pod: &str,
        template: &str,
        timeout: Duration,
        mut done: impl FnMut(&str) -> bool,
    ) -> Vec<(String, std::time::SystemTime)> {
        let mut child = self
            .cp
            .command("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args([
                "get",
                "pod",
                pod,
                "-w",
                "-o",
                &format!("jsonpath={template}{{\"\\n\"}}"),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map(ChildGuard)
            .expect("kubectl get -w");
        let stdout = child.0.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send((line, std::time::SystemTime::now())).is_err() {
                    break;
                }
            }
        });
        let mut seen: Vec<(String, std::time::SystemTime)> = Vec::new();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let Ok((line, at)) = rx.recv_timeout(Duration::from_millis(500)) else {
                continue;
            };
            if seen.last().map(|(l, _)| l) != Some(&line) {
                let finished = done(&line);
                seen.push((line, at));
                if finished {
                    break;
                }
            }
        }
        seen
    }

    /// "reason: message" of the events about a pod, oldest first.
    pub fn pod_events(&self, pod: &str) -> Vec<String> {
        let Ok(list) = self.kubectl_json(&["get", "events"]) else {
            return Vec::new();
        };
        let mut events: Vec<(String, String)> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["involvedObject"]["name"] == pod)
            .map(|e| {
                let at = e["eventTime"]
                    .as_str()
                    .or(e["lastTimestamp"].as_str())
                    .unwrap_or("")
                    .to_string();
                (
                    at,
                    format!(
                        "{}: {}",
                        e["reason"].as_str().unwrap_or(""),
                        e["message"].as_str().unwrap_or("")
                    ),
                )
            })
            .collect();
        events.sort();
        events.into_iter().map(|(_, text)| text).collect()
    }

    pub fn metrics(&self) -> String {
        self.on_node(
            "curl",
            &["-sk", "-m", "5", "https://127.0.0.1:10250/metrics"],
        )
        .unwrap_or_default()
    }
}

fn ipam_dir(node: &str) -> PathBuf {
    PathBuf::from(format!("/var/lib/keelson/cni/keelson-{node}"))
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn block_on<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    // A thread of its own, so this works from sync tests and from Drop alike.
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    })
    .join()
    .expect("runtime thread")
}

/// Stops and removes every sandbox over CRI (which runs CNI DEL and removes the pod netns).
fn remove_all_sandboxes(socket: PathBuf) {
    block_on(async move {
        let Ok(channel) = keelson_proto::connect_unix(&socket).await else {
            return;
        };
        let mut rt = keelson_proto::RuntimeServiceClient::new(channel);
        let Ok(list) = rt
            .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
            .await
        else {
            return;
        };
        for s in list.into_inner().items {
            let _ = rt
                .stop_pod_sandbox(cri::StopPodSandboxRequest {
                    pod_sandbox_id: s.id.clone(),
                })
                .await;
            let _ = rt
                .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                    pod_sandbox_id: s.id,
                })
                .await;
        }
    });
}

/// A child process killed (by its PID) when dropped, also when a test panics half-way.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.extra.clear();
        self.stop_agent("KILL");
        remove_all_sandboxes(self.socket.clone());
        self.containerd.take();
        self.api.take();
        let _ = std::fs::remove_dir_all(ipam_dir(&self.node_name));
    }
}

/// Container IDs and restart counts by container name, from the pod's status.
pub fn container_ids(pod: &Value) -> HashMap<String, (String, i64)> {
    pod["status"]["containerStatuses"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        (
                            c["containerID"].as_str().unwrap_or("").to_string(),
                            c["restartCount"].as_i64().unwrap_or(-1),
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A pod manifest bound to the node (as the scheduler would bind it).
pub fn pod_yaml(name: &str, node: &str, body: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {name}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 2\n{body}")
}
