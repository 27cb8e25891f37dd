//! A cluster for the agent's tests, built on keelson-testing: a "control plane" test host running
//! keelson-apiserver on a bridge (172.31.255.0/24) that every node host joins by a veth pair, and
//! node hosts each running containerd and keelson-agent (with keelson-cni). kubectl runs inside
//! the control-plane host. Everything is removed on drop.
//!
//! What is the agent's own stays here: how an agent is started for a node, the bridge and node
//! links, and reading the runtime's state over CRI.

#![allow(dead_code)]

pub mod bootstrap;
pub mod logind;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use keelson_agent::cri::{self, Cri, GrpcCri};
use keelson_agent::metrics::Metrics;
use keelson_proto::runtime::v1 as proto;
use keelson_testing::{
    binary, eventually, Apiserver, ChildGuard, Component, Containerd, Kubectl, TestHost,
};
use serde_json::Value;

pub const CP_IP: &str = "172.31.255.1";
pub const NODE_IP: &str = "172.31.255.2";
pub const POD_CIDR: &str = "10.244.7.0/24";
pub const HTTP_IMAGE: &str = "127.0.0.1:5000/keelson/podname-http:1";
/// Written into pods' resolv.conf (dnsPolicy ClusterFirst); nothing answers there in tests.
pub const CLUSTER_DNS: &str = "10.96.0.10";
/// The machine's shared disk is often past the kubelet's default disk thresholds
/// (imagefs.available<15%, image GC from 85%): disk eviction is set low and image garbage
/// collection off (--image-gc-high-threshold 100) for test nodes, as kind does; memory keeps
/// upstream's default.
pub const TEST_EVICTION_HARD: &str = "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%,imagefs.inodesFree<1%";
pub const BUSYBOX: &str = "127.0.0.1:5000/keelson/busybox:1.35";
/// The control-plane host's bridge, which every node's veth joins.
const CP_BRIDGE: &str = "kbr";

/// One node: its test host, containerd and keelson-agent.
pub struct Node {
    pub name: String,
    pub ip: String,
    /// Passed as --pod-cidr; None: the agent waits for spec.podCIDR (node IPAM).
    pub pod_cidr: Option<String>,
    pub socket: PathBuf,
    /// Its CNI configuration and pod logs.
    dir: PathBuf,
    /// The agent's --root-dir.
    root_dir: PathBuf,
    log: PathBuf,
    kubeconfig: PathBuf,
    /// TLS bootstrap: the agent gets --bootstrap-kubeconfig and writes `kubeconfig` itself.
    bootstrap: Option<PathBuf>,
    /// More agent flags, for the next `start_agent` (e.g. `--network-backend vxlan`).
    pub extra_args: Vec<String>,
    /// More environment for the next `start_agent` (e.g. DBUS_SYSTEM_BUS_ADDRESS).
    pub extra_env: Vec<(String, String)>,
    /// --client-ca-file: the API server's CA, so that its kubelet client certificate
    /// authenticates on port 10250 (kubectl logs).
    client_ca: PathBuf,
    agent: Option<ChildGuard>,
    containerd: Containerd,
    pub host: TestHost,
}

impl Node {
    /// Node number `index` (0, 1, ...): address 172.31.255.2, .3, ...; pod CIDR 10.244.7.0/24,
    /// 10.244.8.0/24, ... (unless `join.pod_cidr` is false); joined to the control plane's
    /// bridge; containerd and the agent started (with the admin kubeconfig, or bootstrapping).
    fn start(cluster: &Cluster, host: TestHost, index: usize, join: &Join) -> Node {
        let ip = format!("172.31.255.{}", 2 + index);
        link_node(&cluster.cp, &host, index, &ip);
        let dir = match index {
            0 => cluster.tmp.path().to_path_buf(),
            i => cluster.tmp.path().join(format!("node{i}")),
        };
        let containerd = Containerd::start_with(
            &host,
            &cluster.cni_bin,
            &dir.join("net.d"),
            join.disk.as_deref(),
        );
        let root_dir = match join.disk {
            Some(_) => containerd.root().join("agent"),
            None => dir.join("agent-root"),
        };
        let log = match index {
            0 => cluster.tmp.path().join("agent.log"),
            i => cluster.tmp.path().join(format!("agent{i}.log")),
        };
        let mut node = Node {
            name: host.name.clone(),
            ip,
            pod_cidr: join.pod_cidr.then(|| format!("10.244.{}.0/24", 7 + index)),
            socket: containerd.socket.clone(),
            log,
            kubeconfig: match (&join.bootstrap, &join.server) {
                (Some(_), _) => dir.join("kubeconfig"),
                (None, Some(server)) => server.clone(),
                (None, None) => cluster.api.kubeconfig(),
            },
            bootstrap: join.bootstrap.clone(),
            extra_args: join.args.clone(),
            extra_env: Vec::new(),
            client_ca: cluster.api_dir().join("ca.crt"),
            dir,
            root_dir,
            agent: None,
            containerd,
            host,
        };
        node.start_agent();
        node
    }

    pub fn start_agent(&mut self) {
        assert!(self.agent.is_none(), "agent already running");
        let path = |p: &str| self.dir.join(p).display().to_string();
        let mut cmd = self.host.command(env!("CARGO_BIN_EXE_keelson-agent"));
        cmd.args(["--kubeconfig", &self.kubeconfig.display().to_string()])
            .args(["--hostname-override", &self.name])
            .args([
                "--container-runtime-endpoint",
                &self.socket.display().to_string(),
            ])
            .args(self.bootstrap.iter().flat_map(|b| {
                [
                    "--bootstrap-kubeconfig".to_string(),
                    b.display().to_string(),
                    "--cert-dir".to_string(),
                    self.dir.join("pki").display().to_string(),
                ]
            }))
            .args(["--node-ip", &self.ip])
            .args(["--client-ca-file", &self.client_ca.display().to_string()])
            .args(
                self.pod_cidr
                    .iter()
                    .flat_map(|c| ["--pod-cidr", c.as_str()]),
            )
            .args(["--cni-conf-dir", &path("net.d")])
            .args(["--root-dir", &self.root_dir.display().to_string()])
            .args(["--pod-log-dir", &path("pod-logs")])
            .args(["--cgroup-root", &format!("/{}", self.name)])
            .args(["--cluster-dns", CLUSTER_DNS])
            .arg("--cni-portmap")
            // Small, so that a test sees rotation within seconds.
            .args(["--container-log-max-size", "64Ki"])
            .args(["--container-log-max-files", "3"])
            .args(self.default_unless_given("--eviction-hard", TEST_EVICTION_HARD))
            .args(self.default_unless_given("--image-gc-high-threshold", "100"))
            .args(&self.extra_args)
            .envs(self.extra_env.iter().cloned())
            .env("RUST_LOG", "keelson_agent=debug");
        self.agent = Some(ChildGuard::spawn_logged(&mut cmd, &self.log));
    }

    /// `flag value`, unless the test gives the flag itself.
    fn default_unless_given<'a>(&self, flag: &'a str, value: &'a str) -> Vec<&'a str> {
        match self.extra_args.iter().any(|a| a.starts_with(flag)) {
            true => Vec::new(),
            false => vec![flag, value],
        }
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The running agent's process id (None once stopped or exited).
    pub fn agent_pid(&mut self) -> Option<u32> {
        let agent = self.agent.as_mut()?;
        agent.is_running().then(|| agent.pid()).flatten()
    }

    /// The kubeconfig the agent uses (for a bootstrapping node: the one it writes).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `--cert-dir` of a bootstrapping node.
    pub fn cert_dir(&self) -> PathBuf {
        self.dir.join("pki")
    }

    /// The CNI configuration the agent wrote, if any.
    pub fn cni_conflist(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.join("net.d").join("10-keelson.conflist")).ok()
    }

    /// Runs a command inside this node's test host.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        keelson_testing::run(self.host.command(program).args(args))
    }

    /// Stops the agent: SIGTERM (with time to exit) or kill -9.
    pub fn stop_agent(&mut self, signal: &str) {
        if let Some(mut agent) = self.agent.take() {
            match signal {
                "TERM" => {
                    agent.terminate(Duration::from_secs(30));
                }
                _ => agent.kill9(),
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_agent("KILL");
        remove_all_sandboxes(self.socket.clone());
        let _ = std::fs::remove_dir_all(ipam_dir(&self.name));
        // The node's own folder under /var/lib/keelson, empty once its IPAM state is gone.
        let _ = std::fs::remove_dir(Path::new("/var/lib/keelson").join(&self.name));
    }
}

/// How a node joins: with --pod-cidr or waiting for node IPAM; with the admin kubeconfig or by
/// TLS bootstrap with a bootstrap kubeconfig.
struct Join {
    pod_cidr: bool,
    bootstrap: Option<PathBuf>,
    /// More agent flags from its first start.
    args: Vec<String>,
    /// The node's disk: a loop-mounted filesystem of this size holding containerd's root and
    /// the agent's (None: the machine's).
    disk: Option<String>,
    /// The kubeconfig of an API server other than the cluster's (None: the cluster's admin).
    server: Option<PathBuf>,
}

/// Joins a node host to the control plane's bridge with `ip`/24 on its side (link kv1).
fn link_node(cp: &TestHost, node: &TestHost, index: usize, ip: &str) {
    let cp_side = format!("kp{index}");
    cp.ip(&[
        "link", "add", &cp_side, "type", "veth", "peer", "name", "kv1", "netns", &node.name,
    ]);
    cp.ip(&["link", "set", &cp_side, "master", CP_BRIDGE, "up"]);
    node.ip(&["addr", "add", &format!("{ip}/24"), "dev", "kv1"]);
    node.ip(&["link", "set", "kv1", "up"]);
}

pub struct Cluster {
    /// The first node's name.
    pub node_name: String,
    /// Nodes, the first one first; dropped before the API server.
    nodes: Vec<Node>,
    /// Stopped before the API server.
    controller_manager: Option<ChildGuard>,
    scheduler: Option<ChildGuard>,
    api: Apiserver,
    pub cp: TestHost,
    pub tmp: tempfile::TempDir,
    cni_bin: PathBuf,
}

impl Cluster {
    /// The control plane and one node, Ready.
    pub fn start(prefix: &str) -> Cluster {
        let mut cluster = Cluster::control_plane(prefix);
        let name = cluster.add(prefix);
        cluster.node_name = name;
        cluster
    }

    /// The control plane and one node whose disk is a filesystem of `size` (such as "256M")
    /// holding the images and the agent's root, Ready.
    pub fn start_on_small_disk(prefix: &str, size: &str, args: &[&str]) -> Cluster {
        let mut cluster = Cluster::control_plane(prefix);
        let join = Join {
            pod_cidr: true,
            bootstrap: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            disk: Some(size.to_string()),
            server: None,
        };
        cluster.node_name = cluster.add_ready(prefix, &join);
        cluster
    }

    /// The control plane (the API server in its test host) and no node yet.
    pub fn control_plane(prefix: &str) -> Cluster {
        keelson_testing::require_root_and_tools(&["curl", "kubectl", "iptables"]);
        let cp = TestHost::create(&format!("{prefix}c"));
        cp.ip(&["link", "add", CP_BRIDGE, "type", "bridge"]);
        cp.ip(&["addr", "add", &format!("{CP_IP}/24"), "dev", CP_BRIDGE]);
        cp.ip(&["link", "set", CP_BRIDGE, "up"]);
        // A low TokenRequest minimum lets a test watch projected tokens being renewed.
        let api = Apiserver::start_in(&cp, CP_IP, &["--testing-min-token-expiration-seconds", "1"]);
        // What the controller manager's service-account and root-CA publisher controllers give
        // every namespace: pods' token volumes need both, and these tests run no controller
        // manager (one that starts later finds them there).
        api.kubectl_ok(&["create", "serviceaccount", "default"]);
        let ca = format!(
            "--from-file=ca.crt={}",
            api.dir.path().join("ca.crt").display()
        );
        api.kubectl_ok(&["create", "configmap", "kube-root-ca.crt", &ca]);
        let tmp = tempfile::tempdir().expect("tempdir");
        let cni_bin = cni_bin_dir(tmp.path());
        Cluster {
            node_name: String::new(),
            nodes: Vec::new(),
            controller_manager: None,
            scheduler: None,
            api,
            cp,
            tmp,
            cni_bin,
        }
    }

    /// The API server's data directory (its CA: ca.crt, ca.key).
    pub fn api_dir(&self) -> &Path {
        self.api.dir.path()
    }

    /// Starts keelson-controller-manager in the control-plane host as itself
    /// (system:kube-controller-manager) with `extra` flags.
    pub fn start_controller_manager(&mut self, extra: &[&str]) {
        let mut cmd = self.cp.command(binary("keelson-controller-manager"));
        let kubeconfig = self.api.kubeconfig_of(Component::ControllerManager);
        cmd.args(["--kubeconfig", &kubeconfig.display().to_string()])
            .args(extra)
            .env("RUST_LOG", "keelson_controllers=debug");
        let log = self.tmp.path().join("controller-manager.log");
        self.controller_manager = Some(ChildGuard::spawn_logged(&mut cmd, &log));
    }

    /// Starts keelson-scheduler in the control-plane host as itself (system:kube-scheduler).
    pub fn start_scheduler(&mut self) {
        let mut cmd = self.cp.command(binary("keelson-scheduler"));
        let kubeconfig = self.api.kubeconfig_of(Component::Scheduler);
        cmd.args(["--kubeconfig", &kubeconfig.display().to_string()]);
        let log = self.tmp.path().join("scheduler.log");
        self.scheduler = Some(ChildGuard::spawn_logged(&mut cmd, &log));
    }

    pub fn controller_manager_log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("controller-manager.log")).unwrap_or_default()
    }

    /// Adds a node in a new test host and waits until it is Ready; returns its name.
    fn add(&mut self, prefix: &str) -> String {
        let join = Join {
            pod_cidr: true,
            bootstrap: None,
            args: Vec::new(),
            disk: None,
            server: None,
        };
        self.add_ready(prefix, &join)
    }

    /// Adds a node that gets its credentials by TLS bootstrap with `bootstrap` (a kubeconfig
    /// with a bootstrap token) and its pod CIDR from node IPAM; waits until it is Ready.
    pub fn add_bootstrapping_node(&mut self, prefix: &str, bootstrap: &Path) -> String {
        self.add_bootstrapping_node_with(prefix, bootstrap, &[])
    }

    /// The same, the agent started with more flags.
    pub fn add_bootstrapping_node_with(
        &mut self,
        prefix: &str,
        bootstrap: &Path,
        args: &[&str],
    ) -> String {
        let join = Join {
            pod_cidr: false,
            bootstrap: Some(bootstrap.to_path_buf()),
            args: args.iter().map(|a| a.to_string()).collect(),
            disk: None,
            server: None,
        };
        self.add_ready(prefix, &join)
    }

    fn add_ready(&mut self, prefix: &str, join: &Join) -> String {
        let name = self.add_unready(prefix, join);
        self.wait_until(
            Duration::from_secs(30),
            &format!("node {name} Ready"),
            || {
                let node = self.kubectl_json(&["get", "node", &name]).ok()?;
                let ready = node["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                ready.then_some(())
            },
        );
        name
    }

    /// Adds the next node (address 172.31.255.3, .4, ...; pod CIDR 10.244.8.0/24, ...) and waits
    /// until it is Ready.
    pub fn add_node(&mut self, prefix: &str) -> &Node {
        self.add(prefix);
        self.nodes.last().expect("just added")
    }

    /// Adds the next node with no --pod-cidr, so that it waits for spec.podCIDR; returns its name
    /// once its Node is registered.
    pub fn add_node_without_pod_cidr(&mut self, prefix: &str) -> String {
        let join = Join {
            pod_cidr: false,
            bootstrap: None,
            args: Vec::new(),
            disk: None,
            server: None,
        };
        let name = self.add_unready(prefix, &join);
        self.wait_until(Duration::from_secs(30), "node registered", || {
            self.kubectl_json(&["get", "node", &name]).ok()
        });
        name
    }

    /// Adds a node whose agent uses the API server `kubeconfig` names instead of the cluster's
    /// (a server Keelson did not write); returns its name at once.
    pub fn add_node_against(&mut self, prefix: &str, kubeconfig: &Path) -> String {
        let join = Join {
            pod_cidr: true,
            bootstrap: None,
            args: Vec::new(),
            disk: None,
            server: Some(kubeconfig.to_path_buf()),
        };
        self.add_unready(prefix, &join)
    }

    fn add_unready(&mut self, prefix: &str, join: &Join) -> String {
        let host = TestHost::create(prefix);
        let node = Node::start(self, host, self.nodes.len(), join);
        let name = node.name.clone();
        self.nodes.push(node);
        name
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name} in this cluster"))
    }

    pub fn node_mut(&mut self, name: &str) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name} in this cluster"))
    }

    fn first(&self) -> &Node {
        &self.nodes[0]
    }

    pub fn start_agent(&mut self) {
        self.nodes[0].start_agent();
    }

    /// Stops the first node's agent with "TERM" or "KILL".
    pub fn stop_agent(&mut self, signal: &str) {
        self.nodes[0].stop_agent(signal);
    }

    /// Restarts the first node's containerd (its containers keep running in their shims).
    pub fn restart_containerd(&self) {
        self.first().containerd.restart();
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(&self.first().log).unwrap_or_default()
    }

    /// kubectl (in the control-plane host) with the admin kubeconfig.
    pub fn kubectl_cmd(&self) -> Kubectl {
        self.api.kubectl_cmd()
    }

    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.kubectl_cmd().run(args)
    }

    pub fn kubectl_json(&self, args: &[&str]) -> Result<Value, String> {
        self.kubectl_cmd().json(args)
    }

    pub fn apply(&self, yaml: &str) {
        self.kubectl_cmd().apply(yaml);
    }

    pub fn pod(&self, name: &str) -> Value {
        self.kubectl_json(&["get", "pod", name])
            .unwrap_or(Value::Null)
    }

    /// Polls `check` until it returns Some, or fails the test naming `what`, with the end of the
    /// agent's log.
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
        eventually(what, timeout, || {
            check().ok_or_else(|| {
                // The agent's log is read only near the end, for the failure message.
                if start.elapsed() + Duration::from_secs(2) < timeout {
                    return "not yet".to_string();
                }
                format!(
                    "\n--- agent log (tail) ---\n{}",
                    tail(&self.agent_log(), 40)
                )
            })
        })
    }

    /// Runs a command inside the first node's test host.
    pub fn on_node(&self, program: &str, args: &[&str]) -> Result<String, String> {
        keelson_testing::run(self.first().host.command(program).args(args))
    }

    /// Runs a command inside the control-plane host.
    pub fn on_cp(&self, program: &str, args: &[&str]) -> Result<String, String> {
        keelson_testing::run(self.cp.command(program).args(args))
    }

    /// Stops the API server (SIGTERM); `start_apiserver` starts it again on the same data.
    pub fn stop_apiserver(&mut self) {
        self.api.stop();
    }

    pub fn start_apiserver(&mut self) {
        self.api.start_again();
        self.api.wait_ready();
    }

    /// The names (tags) of the images the first node's containerd holds.
    pub fn images(&self) -> Vec<String> {
        let socket = self.first().socket.clone();
        block_on(async move {
            let images = connect(&socket).await.list_images().await;
            let images = images.expect("ListImages");
            images.into_iter().flat_map(|i| i.repo_tags).collect()
        })
    }

    /// The pod sandboxes and containers the first node's containerd holds.
    pub fn runtime_state(&self) -> (Vec<proto::PodSandbox>, Vec<proto::Container>) {
        let socket = self.first().socket.clone();
        block_on(async move {
            let cri = connect(&socket).await;
            let sandboxes = cri
                .list_pod_sandbox(HashMap::new())
                .await
                .expect("ListPodSandbox");
            let containers = cri
                .list_containers(HashMap::new())
                .await
                .expect("ListContainers");
            (sandboxes, containers)
        })
    }

    /// Stops a pod sandbox on the first node (CRI StopPodSandbox): how a dead sandbox looks.
    pub fn stop_sandbox(&self, id: &str) {
        let socket = self.first().socket.clone();
        let id = id.to_string();
        block_on(async move {
            connect(&socket)
                .await
                .stop_pod_sandbox(&id)
                .await
                .expect("StopPodSandbox")
        })
    }

    /// Runs `cmd` in a container on the first node (CRI ExecSync).
    pub fn exec(&self, container_id: &str, cmd: &[&str]) -> proto::ExecSyncResponse {
        let socket = self.first().socket.clone();
        let id = container_id.to_string();
        let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        block_on(async move {
            connect(&socket)
                .await
                .exec_sync(&id, cmd, 10)
                .await
                .expect("ExecSync")
        })
    }

    /// Addresses the first node's IPAM has handed out (files named by IP under its data directory).
    pub fn allocated_addresses(&self) -> Vec<String> {
        walk(&ipam_dir(&self.node_name))
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .filter(|name| name.parse::<std::net::Ipv4Addr>().is_ok())
            .collect()
    }

    /// The pod's log files for a container on the first node (current and rotated).
    pub fn log_files(&self, pod: &Value, container: &str) -> Vec<PathBuf> {
        let m = &pod["metadata"];
        let dir = self.first().dir.join("pod-logs").join(format!(
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
    ) -> Vec<(String, SystemTime)> {
        let jsonpath = format!("jsonpath={template}{{\"\\n\"}}");
        let mut child = self
            .kubectl_cmd()
            .command(&["get", "pod", pod, "-w", "-o", &jsonpath])
            .stdout(Stdio::piped())
            .spawn()
            .expect("kubectl get -w");
        let stdout = child.stdout.take().expect("stdout");
        let _watch = ChildGuard::new(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send((line, SystemTime::now())).is_err() {
                    break;
                }
            }
        });
        let mut seen: Vec<(String, SystemTime)> = Vec::new();
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
                let text = format!(
                    "{}: {}",
                    e["reason"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or("")
                );
                (at, text)
            })
            .collect();
        events.sort();
        events.into_iter().map(|(_, text)| text).collect()
    }

    /// The admin's bearer token (system:masters).
    pub fn admin_token(&self) -> String {
        self.api.token()
    }

    /// GET `path` on the first node's port 10250 with `token` (none: no credentials), from
    /// inside the node: the body followed by " <status code>".
    pub fn agent_get(&self, path: &str, token: Option<&str>) -> String {
        let header = token.map(|t| format!("Authorization: Bearer {t}"));
        match &header {
            Some(h) => self.agent_curl(path, &["-H", h]),
            None => self.agent_curl(path, &[]),
        }
    }

    /// GET `path` on the first node's port 10250 with more curl arguments (e.g. --cert, --key).
    pub fn agent_curl(&self, path: &str, extra: &[&str]) -> String {
        let url = format!("https://127.0.0.1:10250{path}");
        let mut args = vec!["-sk", "-m", "5", "-w", " %{http_code}"];
        args.extend(extra);
        args.push(&url);
        self.on_node("curl", &args).unwrap_or_else(|e| e)
    }

    /// The first node's agent metrics (read with the admin's token).
    pub fn metrics(&self) -> String {
        let answer = self.agent_get("/metrics", Some(&self.admin_token()));
        answer.strip_suffix(" 200").unwrap_or_default().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Later nodes first, as they were added the other way round.
        while self.nodes.pop().is_some() {}
    }
}

/// CNI plugins for containerd: keelson-cni (as itself, its IPAM and loopback) and Debian's
/// portmap for hostPort, chained after it.
fn cni_bin_dir(tmp: &Path) -> PathBuf {
    let cni = binary("keelson-cni");
    let bin = tmp.join("cni-bin");
    std::fs::create_dir_all(&bin).expect("cni bin dir");
    for name in ["keelson-cni", "keelson-ipam", "loopback"] {
        std::os::unix::fs::symlink(&cni, bin.join(name)).expect("cni symlink");
    }
    std::os::unix::fs::symlink("/usr/lib/cni/portmap", bin.join("portmap"))
        .expect("portmap symlink");
    bin
}

/// The IPAM state of a node's agent: its default, which holds the node name.
fn ipam_dir(node: &str) -> PathBuf {
    keelson_agent::paths::NodePaths::defaults(node).cni_ipam_data_dir
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs a future to the end on a runtime of its own thread, so this works from sync tests and
/// from Drop alike.
pub fn block_on<F: std::future::Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
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

async fn connect(socket: &Path) -> GrpcCri {
    GrpcCri::connect(socket, Arc::new(Metrics::new()))
        .await
        .expect("connect to containerd")
}

/// Stops and removes every sandbox over CRI (which runs CNI DEL and removes the pod netns).
fn remove_all_sandboxes(socket: PathBuf) {
    block_on(async move {
        if let Ok(cri) = GrpcCri::connect(&socket, Arc::new(Metrics::new())).await {
            let _ = cri::remove_all_sandboxes(&cri).await;
        }
    });
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
