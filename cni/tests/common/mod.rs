//! keelson-cni run the way a runtime runs it (env + stdin), with its process placed in a test
//! host's namespace, and the configurations the tests give it. Test hosts, root and tool checks
//! and waiting come from keelson-testing.
#![allow(dead_code)]

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};

pub use keelson_testing::{eventually, require_root_and_tools, TestHost};

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
    pub host: &'a TestHost,
    pub command: &'a str,
    pub container_id: &'a str,
    pub netns: Option<String>,
    pub ifname: &'a str,
    pub cni_path: String,
}

impl<'a> Call<'a> {
    pub fn new(bin: &'a Path, host: &'a TestHost, command: &'a str, container_id: &'a str) -> Self {
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

    pub fn netns(mut self, ns: &TestHost) -> Self {
        self.netns = Some(ns.path().to_string_lossy().into_owned());
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
        // Entered between fork and exec rather than through nsenter: one process per call, as a
        // runtime runs plugins, so the benchmark times the plugin and not a wrapper.
        let host = File::open(self.host.path()).expect("open host netns");
        // SAFETY: setns is async-signal-safe; the closure touches only the fd it owns.
        unsafe {
            cmd.pre_exec(move || {
                setns(host.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
            });
        }
        cmd
    }

    /// Starts the plugin with `stdin` written to it.
    pub fn spawn(&self, stdin: &str) -> std::process::Child {
        let mut child = self.command().spawn().expect("spawn plugin");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child
    }

    pub fn run(&self, stdin: &str) -> Run {
        let start = Instant::now();
        let out = self.spawn(stdin).wait_with_output().expect("wait plugin");
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: start.elapsed(),
        }
    }

    /// Starts the plugin and kills it (SIGKILL) after `delay`, as a crash would; true when the
    /// kill came before the plugin finished.
    pub fn run_killed_after(&self, stdin: &str, delay: Duration) -> bool {
        let mut child = self.spawn(stdin);
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait().expect("wait plugin");
        std::os::unix::process::ExitStatusExt::signal(&status) == Some(9)
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

/// The veth links in `host`.
pub fn veths(host: &TestHost) -> Vec<String> {
    let mut links = host.links();
    links.retain(|l| l.starts_with("veth"));
    links
}

/// Waits until `host` holds exactly `n` veths (DEL removes pairs in the background).
pub fn wait_veths(host: &TestHost, n: usize) {
    eventually(
        &format!("{n} veths in {}", host.name),
        Duration::from_secs(5),
        || {
            let left = veths(host);
            if left.len() == n {
                Ok(())
            } else {
                Err(format!("links: {:?}", host.links()))
            }
        },
    );
}
