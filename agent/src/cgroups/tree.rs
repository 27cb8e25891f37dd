//! The agent's cgroup tree on disk: `<root>`, `<root>/burstable`, `<root>/besteffort` and the
//! pods' `pod<uid>` folders, in every hierarchy on cgroup v1 or the one on v2. The mount point
//! is a parameter, so unit tests write into a temporary folder instead of the machine's.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use keelson_daemon::cgroupfs;

use super::limits::{files, Limits, Version};

/// Controllers whose files the agent writes (runc creates the pods' others as it needs them).
const CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// The QoS classes' folders under the root; Guaranteed pods sit in the root itself.
pub const QOS_DIRS: [&str; 3] = ["", "burstable", "besteffort"];

pub struct Tree {
    base: PathBuf,
    /// The agent's --cgroup-root, relative to each hierarchy.
    root: PathBuf,
    version: Version,
}

impl Tree {
    pub fn new(base: &Path, root: &str) -> Tree {
        let version = if cgroupfs::is_v2(base) {
            Version::V2
        } else {
            Version::V1
        };
        Tree {
            base: base.to_path_buf(),
            root: PathBuf::from(root.trim_matches('/')),
            version,
        }
    }

    /// The folder of `rel` (below the root) where `controller`'s files are.
    pub fn dir(&self, controller: &str, rel: &Path) -> PathBuf {
        match self.version {
            Version::V2 => self.base.join(&self.root).join(rel),
            Version::V1 => self.base.join(controller).join(&self.root).join(rel),
        }
    }

    /// Creates `rel` (and what is above it) and writes its limits; an error names the file.
    pub fn apply(&self, rel: &Path, limits: &Limits) -> io::Result<()> {
        for controller in CONTROLLERS {
            self.create(controller, rel)?;
        }
        for (controller, file, value) in files(self.version, limits) {
            if !self.mounted(controller) {
                continue;
            }
            let path = self.dir(controller, rel).join(file);
            std::fs::write(&path, &value).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: writing {value}: {e}", path.display()),
                )
            })?;
        }
        Ok(())
    }

    /// Whether the machine has the controller's hierarchy (cgroup v1: pids is missing on old
    /// kernels); there is nothing to limit with one it does not have.
    fn mounted(&self, controller: &str) -> bool {
        self.version == Version::V2 || self.base.join(controller).is_dir()
    }

    fn create(&self, controller: &str, rel: &Path) -> io::Result<()> {
        let dir = self.dir(controller, rel);
        if !self.mounted(controller) {
            return Ok(());
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        if self.version == Version::V2 {
            self.delegate(&dir);
        }
        Ok(())
    }

    /// cgroup v2 gives a folder a controller's files only when every folder above it lists
    /// the controller in cgroup.subtree_control.
    fn delegate(&self, dir: &Path) {
        let above: Vec<&Path> = dir
            .ancestors()
            .skip(1)
            .take_while(|a| a.starts_with(&self.base))
            .collect();
        for folder in above.into_iter().rev() {
            let available =
                std::fs::read_to_string(folder.join("cgroup.controllers")).unwrap_or_default();
            for c in CONTROLLERS {
                if available.split_whitespace().any(|a| a == c) {
                    // Already enabled, or refused for a folder with tasks: either way nothing
                    // more can be done from here, and a failed write of a limit says so.
                    let _ = std::fs::write(folder.join("cgroup.subtree_control"), format!("+{c}"));
                }
            }
        }
    }

    /// Removes `rel` and what is below it from every hierarchy.
    pub fn remove(&self, rel: &Path) -> io::Result<()> {
        let mut result = Ok(());
        for h in cgroupfs::hierarchies(&self.base) {
            if let Err(e) = cgroupfs::remove_tree(&h.join(&self.root).join(rel)) {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// The pods' folders in any hierarchy: pod UID -> folders below the root.
    pub fn pod_dirs(&self) -> BTreeMap<String, Vec<PathBuf>> {
        let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for h in cgroupfs::hierarchies(&self.base) {
            for qos in QOS_DIRS {
                let Ok(entries) = std::fs::read_dir(h.join(&self.root).join(qos)) else {
                    continue;
                };
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let Some(uid) = name.strip_prefix("pod") else {
                        continue;
                    };
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        let rel = Path::new(qos).join(&name);
                        let dirs = out.entry(uid.to_string()).or_default();
                        if !dirs.contains(&rel) {
                            dirs.push(rel);
                        }
                    }
                }
            }
        }
        out
    }
}
