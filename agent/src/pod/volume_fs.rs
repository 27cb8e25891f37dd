//! What a volume's directory gets from the node besides its files: a tmpfs for emptyDir
//! `medium: Memory` (sized as upstream: sizeLimit, else the pod's memory limit), and the pod's
//! fsGroup as the kubelet sets volume ownership (group, group permissions, setgid directories;
//! fsGroupChangePolicy OnRootMismatch skips a volume whose root is right already).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::quantity;

/// The size of a Memory emptyDir: its sizeLimit, else the sum of the containers' memory limits
/// when every container has one, else none (tmpfs's default, half the node's memory).
pub fn memory_size(pod: &Pod, size_limit: Option<&str>) -> Option<i64> {
    let limit = size_limit.and_then(quantity::bytes).filter(|b| *b > 0);
    limit.or_else(|| {
        let containers = &pod.spec.as_ref()?.containers;
        containers
            .iter()
            .map(|c| {
                let limits = c.resources.as_ref()?.limits.as_ref()?;
                quantity::bytes(&limits.get("memory")?.0)
            })
            .sum::<Option<i64>>()
    })
}

/// The mount points at or below `dir`, deepest first (from /proc/self/mountinfo).
fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        // Octal escapes (\040 for a space) never occur in the agent's own paths.
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

/// Mounts a tmpfs on `dir` unless one is there already (a container restart prepares the
/// volumes again; the pod's data stays).
pub fn mount_tmpfs(dir: &Path, size: Option<i64>) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if mounts_below(dir).iter().any(|m| m == dir) {
        return Ok(());
    }
    let mut options = "mode=0777".to_string();
    if let Some(bytes) = size {
        options.push_str(&format!(",size={bytes}"));
    }
    use nix::mount::{mount, MsFlags};
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        flags,
        Some(options.as_str()),
    )
    .map_err(io::Error::from)
}

/// Unmounts whatever is mounted below `dir` (Memory emptyDirs), so that the pod's directory can
/// be removed; lazily, as a container still holding a file must not block the teardown.
pub fn unmount_below(dir: &Path) {
    for m in mounts_below(dir) {
        if let Err(e) = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH) {
            tracing::warn!(path = %m.display(), error = %e, "unmounting a pod volume failed");
        }
    }
}

/// The kubelet's volume ownership: every file's group becomes `gid`, group-readable (and
/// writable unless `readonly`), directories setgid so new files inherit the group. Symlinks
/// (the atomic writer's) are regrouped but never followed.
pub fn set_ownership(
    dir: &Path,
    gid: u32,
    readonly: bool,
    on_root_mismatch: bool,
) -> io::Result<()> {
    let mask = if readonly { 0o440 } else { 0o660 };
    let dir_mask = mask | 0o110 | 0o2000;
    if on_root_mismatch {
        let meta = std::fs::metadata(dir)?;
        if meta.gid() == gid && meta.mode() & dir_mask == dir_mask {
            return Ok(());
        }
    }
    walk(dir, &mut |path, meta| {
        std::os::unix::fs::lchown(path, None, Some(gid))?;
        if meta.file_type().is_symlink() {
            return Ok(());
        }
        let extra = if meta.is_dir() { dir_mask } else { mask };
        let mode = meta.permissions().mode() | extra;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    })
}

fn walk(
    path: &Path,
    f: &mut dyn FnMut(&Path, &std::fs::Metadata) -> io::Result<()>,
) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    f(path, &meta)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            walk(&entry?.path(), f)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_volumes_are_sized_by_their_limit_or_the_pods() {
        let pod = |limits: &[Option<&str>]| -> Pod {
            let containers: Vec<_> = limits
                .iter()
                .map(|l| match l {
                    Some(m) => {
                        serde_json::json!({"name": "c", "resources": {"limits": {"memory": m}}})
                    }
                    None => serde_json::json!({"name": "c"}),
                })
                .collect();
            serde_json::from_value(serde_json::json!({"spec": {"containers": containers}})).unwrap()
        };
        assert_eq!(memory_size(&pod(&[None]), Some("8Mi")), Some(8 << 20));
        assert_eq!(
            memory_size(&pod(&[Some("64Mi"), Some("32Mi")]), None),
            Some(96 << 20)
        );
        assert_eq!(memory_size(&pod(&[Some("64Mi"), None]), None), None);
    }

    #[test]
    fn ownership_gives_the_group_and_setgid_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), "x").unwrap();
        std::fs::set_permissions(dir.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::symlink("sub/f", dir.join("link")).unwrap();
        set_ownership(&dir, 2000, false, false).unwrap();
        let m = |p: &str| std::fs::symlink_metadata(dir.join(p)).unwrap();
        assert_eq!(
            (m("sub/f").gid(), m("sub/f").mode() & 0o7777),
            (2000, 0o660)
        );
        assert_eq!(m("sub").gid(), 2000);
        assert_eq!(m("sub").mode() & 0o2070, 0o2070);
        assert_eq!(m("link").gid(), 2000);
        // OnRootMismatch: a root already right is left as it is, files included.
        std::fs::set_permissions(dir.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        set_ownership(&dir, 2000, false, true).unwrap();
        assert_eq!(m("sub/f").mode() & 0o777, 0o600);
        set_ownership(&dir, 2000, false, false).unwrap();
        assert_eq!(m("sub/f").mode() & 0o777, 0o660);
    }
}
