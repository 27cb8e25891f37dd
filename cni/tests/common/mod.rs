//! Test hosts for keelson-cni: network namespaces this process creates and removes, the plugin
//! run the way a runtime runs it (env + stdin) with its process placed in the host namespace.
#![allow(dead_code)]

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};

pub const NETNS_DIR: &str = "/var/run/netns";
/// Every namespace of these tests is named "kc<pid>-...", so leftovers of dead runs are ours.
pub const PREFIX: &str = "kc";

/// Fails the test loudly when the machine cannot run it.
pub fn require_root_and_tools(tools: &[&str]) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "keelson-cni tests need root (they create network namespaces)"
    );
    for t in tools {
        let found = std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .any(|d| Path::new(d).join(t).is_file());
        assert!(
            found,
            "tool {t:?} is missing: run scripts/install-deps (see scripts/deps.d/cni.txt)"
        );
    }
}

/// Removes namespaces left by earlier runs whose process is gone.
pub fn remove_stale() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

fn rand_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// A network namespace, removed on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(role: &str) -> Netns {
        let name = format!("{PREFIX}{}-{}-{role}", std::process::id(), rand_suffix());
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip netns add");
        assert!(st.success(), "ip netns add {name} failed");
        Netns { name }
    }

    pub fn path(&self) -> String {
        format!("{NETNS_DIR}/{}", self.name)
    }

    /// Runs `ip -n <ns> args...` and returns stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .arg("-n")
            .arg(&self.name)
            .args(args)
            .output()
            .expect("run ip");
        assert!(
            out.status.success(),
            "ip -n {} {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a shell command inside the namespace (nsenter keeps mounts and /sys).
    pub fn sh(&self, cmd: &str) -> Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.path()))
            .args(["sh", "-c", cmd])
            .output()
            .expect("run nsenter")
    }

    /// Runs `f` on a thread that has entered this namespace.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = self.path();
        std::thread::spawn(move || {
            let file = File::open(&path).expect("open netns");
            setns(file.as_fd(), CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("thread in netns panicked")
    }

    /// Link names in this namespace.
    pub fn links(&self) -> Vec<String> {
        self.ip(&["-o", "link", "show"])
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// What one plugin run returned.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {:?} stderr {:?}",
                self.stdout, self.stderr
            )
        })
    }

    /// The CNI error code, asserting the run failed.
    pub fn code(&self) -> u64 {
        assert!(!self.ok, "expected failure, got success: {}", self.stdout);
        self.json()["code"]
            .as_u64()
            .expect("error has a numeric code")
    }

    pub fn expect_ok(self) -> Run {
        assert!(
            self.ok,
            "plugin failed: stdout {} stderr {}",
            self.stdout, self.stderr
        );
        self
    }
}

/// One plugin invocation: binary, command, attachment, configuration.
pub struct Call<'a> {
    pub bin: &'a Path,
    pub host: &'a Netns,
    pub command: &'a str,
    pub container_id: &'a str,
    pub netns: Option<String>,
    pub ifname: &'a str,
    pub cni_path: String,
}

impl<'a> Call<'a> {
    pub fn new(bin: &'a Path, host: &'a Netns, command: &'a str, container_id: &'a str) -> Self {
        Call {
            bin,
            host,
            command,
            container_id,
            netns: None,
            ifname: "eth0",
            cni_path: "/usr/lib/cni".into(),
        }
    }

    pub fn netns(mut self, ns: &Netns) -> Self {
        self.netns = Some(ns.path());
        self
    }

    pub fn ifname(mut self, ifname: &'a str) -> Self {
        self.ifname = ifname;
        self
    }

    pub fn cni_path(mut self, p: &str) -> Self {
        self.cni_path = p.to_string();
        self
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(self.bin);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CNI_COMMAND", self.command)
            .env("CNI_CONTAINERID", self.container_id)
            .env("CNI_IFNAME", self.ifname)
            .env("CNI_PATH", &self.cni_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(ns) = &self.netns {
            cmd.env("CNI_NETNS", ns);
        }
        let host = File::open(self.host.path()).expect("open host netns");
        // SAFETY: setns is async-signal-safe; the closure touches only the fd it owns.
        unsafe {
            cmd.pre_exec(move || {
                setns(host.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
            });
        }
        cmd
    }

    pub fn run(&self, stdin: &str) -> Run {
        let start = Instant::now();
        let mut child = self.command().spawn().expect("spawn plugin");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait plugin");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: start.elapsed(),
        }
    }
}

pub fn keelson_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_keelson-cni"))
}

/// Names the binary under another name (loopback, keelson-ipam) in a private directory.
pub fn alias_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for n in names {
        std::os::unix::fs::symlink(keelson_bin(), dir.path().join(n)).expect("symlink");
    }
    dir
}

/// A keelson-cni (or reference bridge) configuration, cniVersion 1.1.0 (change it with `with`).
pub fn bridge_conf(
    plugin: &str,
    ipam: &str,
    name: &str,
    bridge: &str,
    subnet: &str,
    data_dir: &Path,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut conf = serde_json::json!({
        "cniVersion": "1.1.0",
        "name": name,
        "type": plugin,
        "bridge": bridge,
        "isGateway": true,
        "ipam": {
            "type": ipam,
            "subnet": subnet,
            "dataDir": data_dir.to_str().expect("utf-8 path"),
            "routes": [{"dst": "0.0.0.0/0"}]
        }
    });
    if let (Some(c), Some(e)) = (conf.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    conf
}

/// Adds prevResult (and anything else) to a configuration.
pub fn with(conf: &serde_json::Value, key: &str, value: serde_json::Value) -> serde_json::Value {
    let mut c = conf.clone();
    c[key] = value;
    c
}

/// Allocation files (named by IP) under a network's IPAM directory.
pub fn allocations(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Waits (bounded) until no veth is left in `ns` (DEL removes pairs in the background).
pub fn wait_no_veths(ns: &Netns) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<String> = ns
            .links()
            .into_iter()
            .filter(|l| l.starts_with("veth"))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
