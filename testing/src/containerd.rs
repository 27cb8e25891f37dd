//! A containerd for one node, started inside its test host by `scripts/containerd/start` (its
//! own root, state, socket and a local registry with the test images), stopped and purged on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::hosts::TestHost;
use crate::process::run;
use crate::scripts_dir;

const RUN_DIR: &str = "/run/keelson/containerd";

pub struct Containerd {
    pub name: String,
    pub socket: PathBuf,
    cni_bin_dir: PathBuf,
    cni_conf_dir: PathBuf,
    /// `--root-size`: the root on a loop-mounted filesystem of that size.
    root_size: Option<String>,
}

impl Containerd {
    /// Builds the test images (idempotent) and starts containerd in `host`, named after it.
    pub fn start(host: &TestHost, cni_bin_dir: &Path, cni_conf_dir: &Path) -> Containerd {
        Containerd::start_with(host, cni_bin_dir, cni_conf_dir, None)
    }

    /// The same, with its root on a filesystem of its own of `root_size` (such as "256M"), as
    /// a node with a small disk; removed with it.
    pub fn start_with(
        host: &TestHost,
        cni_bin_dir: &Path,
        cni_conf_dir: &Path,
        root_size: Option<&str>,
    ) -> Containerd {
        crate::require_root_and_tools(&["containerd", "runc", "skopeo", "docker-registry"]);
        run(&mut Command::new(scripts_dir().join("images/build")))
            .unwrap_or_else(|e| panic!("building the test images: {e}"));
        let mut c = Containerd {
            name: host.name.clone(),
            socket: PathBuf::new(),
            cni_bin_dir: cni_bin_dir.to_path_buf(),
            cni_conf_dir: cni_conf_dir.to_path_buf(),
            root_size: root_size.map(String::from),
        };
        c.socket = c.launch();
        c
    }

    /// Runs `scripts/containerd/start` in the host of the same name; returns the socket.
    fn launch(&self) -> PathBuf {
        let out = run(Command::new(scripts_dir().join("containerd/start"))
            .arg(&self.name)
            .args(["--netns", &self.name])
            .arg("--cni-bin-dir")
            .arg(&self.cni_bin_dir)
            .arg("--cni-conf-dir")
            .arg(&self.cni_conf_dir)
            .args(
                self.root_size
                    .iter()
                    .flat_map(|s| ["--root-size", s.as_str()]),
            ))
        .unwrap_or_else(|e| panic!("starting containerd in {}: {e}", self.name));
        out.lines()
            .last()
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("containerd/start printed no socket for {}", self.name))
    }

    /// Its root folder (images and snapshots: the node's image filesystem).
    pub fn root(&self) -> PathBuf {
        Path::new("/var/lib/keelson/containerd")
            .join(&self.name)
            .join("root")
    }

    /// Stops containerd (its containers keep running in their shims) and starts it again on the
    /// same state, as a containerd restart on a node does.
    pub fn restart(&self) {
        run(Command::new(scripts_dir().join("containerd/stop")).arg(&self.name))
            .unwrap_or_else(|e| panic!("stopping containerd {}: {e}", self.name));
        self.launch();
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        stop(&self.name);
    }
}

/// Stops the containerds (named after their hosts) whose creating process is gone.
pub(crate) fn remove_leftovers() {
    if let Ok(dir) = std::fs::read_dir(RUN_DIR) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if crate::hosts::owner_gone(&name) {
                stop(&name);
            }
        }
    }
}

/// Stops a containerd started by `scripts/containerd/start` and removes its state.
fn stop(name: &str) {
    let _ = Command::new(scripts_dir().join("containerd/stop"))
        .args([name, "--purge"])
        .output();
}

/// Writes a conflist for Debian's reference plugins (bridge + host-local + portmap) into `dir`:
/// the baseline Keelson's own plugin is compared with.
pub fn write_reference_conflist(
    dir: &Path,
    network: &str,
    bridge: &str,
    subnet: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": network,
        "plugins": [
            {
                "type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    // Beside `dir` (the test's temporary folder): gone with it.
                    "dataDir": dir.with_file_name(format!("{network}-ipam")),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    });
    std::fs::write(dir.join("10-keelson.conflist"), conf.to_string())
}
