//! Test support (feature `testing`): a "test host" (a network namespace the test creates, with no
//! default route) and a containerd started inside it by `scripts/containerd/start`. Both clean up
//! on drop, and `cleanup_leftovers` removes what a crashed earlier run with the same prefix left.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `scripts/` folder.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// Runs a command, returning its stdout, or a message naming the command and its stderr.
pub fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Fails with a clear reason when the test cannot run here (not root, tools missing).
pub fn require_root_and_tools(tools: &[&str]) {
    assert!(
        nix_is_root(),
        "this test needs root (it creates network namespaces and runs containerd)"
    );
    for tool in tools {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        assert!(found, "this test needs `{tool}`; run scripts/install-deps");
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// A short random suffix for unique names.
pub fn random_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:06x}",
        (nanos ^ std::process::id().wrapping_mul(2654435761)) & 0xff_ffff
    )
}

/// Removes test hosts, registries and containerds whose names start with `kt-{prefix}-`.
pub fn cleanup_leftovers(prefix: &str) {
    let full = format!("kt-{prefix}-");
    if let Ok(dir) = std::fs::read_dir("/run/keelson/containerd") {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&full) {
                let _ = Command::new(scripts_dir().join("containerd/stop"))
                    .args([&name, "--purge"])
                    .output();
            }
        }
    }
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with(&full) {
                remove_cgroups(name);
                let _ = Command::new(scripts_dir().join("registry"))
                    .args(["--netns", name, "stop"])
                    .output();
                let _ = Command::new("ip").args(["netns", "del", name]).output();
            }
        }
    }
}

/// A network namespace created for one test, loopback up, no default route.
pub struct TestHost {
    pub name: String,
}

impl TestHost {
    pub fn create(prefix: &str) -> Result<Self, String> {
        let name = format!("kt-{prefix}-{}", random_suffix());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let host = TestHost { name };
        run(Command::new("ip").args(["-n", &host.name, "link", "set", "lo", "up"]))?;
        Ok(host)
    }

    pub fn netns_path(&self) -> String {
        format!("/var/run/netns/{}", self.name)
    }

    /// A command that runs inside this test host's network namespace (`nsenter --net`).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", self.netns_path())).arg(program);
        cmd
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        let _ = Command::new(scripts_dir().join("registry"))
            .args(["--netns", &self.name, "stop"])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        // Pods of a test host use cgroups under /<host name> (tests pass it as cgroup parent).
        remove_cgroups(&self.name);
    }
}

/// Removes the (empty) cgroup tree `/<root>` in every cgroup v1 controller, deepest first.
pub fn remove_cgroups(root: &str) {
    let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for c in controllers.flatten() {
        let base = c.path().join(root.trim_start_matches('/'));
        let mut dirs = Vec::new();
        collect_dirs(&base, &mut dirs);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    out.push(dir.to_path_buf());
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                collect_dirs(&e.path(), out);
            }
        }
    }
}

/// A containerd running inside a test host, with its own root, state and socket.
pub struct Containerd {
    pub name: String,
    pub socket: PathBuf,
}

impl Containerd {
    /// Builds and pushes the test images (idempotent), then starts containerd in `host`.
    pub fn start(host: &TestHost, cni_bin_dir: &Path, cni_conf_dir: &Path) -> Result<Self, String> {
        run(&mut Command::new(scripts_dir().join("images/build")))?;
        let name = host.name.clone();
        let out = run(Command::new(scripts_dir().join("containerd/start")).args([
            name.as_str(),
            "--netns",
            &host.name,
            "--cni-bin-dir",
            &cni_bin_dir.to_string_lossy(),
            "--cni-conf-dir",
            &cni_conf_dir.to_string_lossy(),
        ]))?;
        let socket = out
            .lines()
            .last()
            .map(PathBuf::from)
            .ok_or_else(|| "containerd/start printed no socket".to_string())?;
        Ok(Containerd { name, socket })
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = Command::new(scripts_dir().join("containerd/stop"))
            .args([&self.name, "--purge"])
            .output();
    }
}

/// Writes a conflist for Debian's reference plugins (bridge + host-local + loopback) into `dir`.
pub fn write_reference_conflist(
    dir: &Path,
    network: &str,
    bridge: &str,
    subnet: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let conf = format!(
        r#"{{"cniVersion":"1.0.0","name":"{network}","plugins":[{{"type":"bridge","bridge":"{bridge}","isGateway":true,"ipMasq":false,"ipam":{{"type":"host-local","ranges":[[{{"subnet":"{subnet}"}}]],"dataDir":"/run/keelson/test-ipam/{network}"}}}},{{"type":"portmap","capabilities":{{"portMappings":true}}}}]}}"#
    );
    std::fs::write(dir.join("10-keelson.conflist"), conf)
}
