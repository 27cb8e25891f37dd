//! The machine's cgroup hierarchies, as the agent manages them and tests clean them up.

use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies are mounted.
pub const MOUNT: &str = "/sys/fs/cgroup";

/// Whether `base` is a cgroup v2 (unified) mount: its root lists the controllers itself.
pub fn is_v2(base: &Path) -> bool {
    base.join("cgroup.controllers").is_file()
}

/// The roots of every hierarchy under `base`: itself on cgroup v2, one folder per mounted
/// controller set on v1 (links such as cpu -> cpu,cpuacct counted once).
pub fn hierarchies(base: &Path) -> Vec<PathBuf> {
    if is_v2(base) {
        return vec![base.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|e| std::fs::canonicalize(e.path()).ok())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Removes the cgroup `dir` and the cgroups below it, deepest first (a cgroup goes with its
/// control files by rmdir alone). Fails, leaving what is still in use, if a cgroup has tasks.
pub fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut dirs = Vec::new();
    collect_dirs(dir, &mut dirs);
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    let mut first_error = None;
    for d in dirs {
        if let Err(e) = std::fs::remove_dir(&d) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    out.push(dir.to_path_buf());
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), out);
        }
    }
}
