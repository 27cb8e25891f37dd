//! A volumeMount's subPath: a directory inside the volume, never anything else on the host.
//! Checked as the kubelet does: relative, no `..`, and still inside the volume once symlinks
//! (which the pod itself may have put into the volume) are resolved.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubPathError {
    #[error("subPath {0:?} must be a relative path")]
    Absolute(String),
    #[error("subPath {0:?} must not contain '..'")]
    Backsteps(String),
    #[error("subPath {sub_path:?} resolves to {resolved}, outside the volume")]
    Outside { sub_path: String, resolved: String },
    #[error("subPath {sub_path:?}: {message}")]
    Io { sub_path: String, message: String },
}

/// The host path of `sub_path` inside `volume_dir`, symlinks resolved. `create`: make missing
/// directories (emptyDir and hostPath do; configMap and secret volumes hold only their keys).
pub fn resolve(volume_dir: &Path, sub_path: &str, create: bool) -> Result<PathBuf, SubPathError> {
    let rel = Path::new(sub_path);
    if rel.is_absolute() {
        return Err(SubPathError::Absolute(sub_path.into()));
    }
    if rel.components().any(|c| c == Component::ParentDir) {
        return Err(SubPathError::Backsteps(sub_path.into()));
    }
    let io = |e: std::io::Error| SubPathError::Io {
        sub_path: sub_path.into(),
        message: e.to_string(),
    };
    let base = volume_dir.canonicalize().map_err(io)?;
    let mut at = base.clone();
    for part in rel.components() {
        let Component::Normal(name) = part else {
            continue; // "." and a leading "./"
        };
        at = at.join(name);
        // Each step is resolved before the next is created, so no directory is ever made
        // through a symlink that points out of the volume.
        if create && std::fs::symlink_metadata(&at).is_err() {
            std::fs::create_dir(&at).map_err(io)?;
        }
        at = match at.canonicalize() {
            Ok(p) => p,
            // A missing file in a configMap/secret volume: the runtime reports it at mount.
            Err(_) if !create => at,
            Err(e) => return Err(io(e)),
        };
        if !at.starts_with(&base) {
            return Err(SubPathError::Outside {
                sub_path: sub_path.into(),
                resolved: at.display().to_string(),
            });
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn volume() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let vol = tmp.path().join("volumes").join("data");
        std::fs::create_dir_all(&vol).unwrap();
        (tmp, vol)
    }

    #[test]
    fn a_relative_path_is_created_inside_the_volume() {
        let (_tmp, vol) = volume();
        let got = resolve(&vol, "logs/app", true).unwrap();
        assert_eq!(got, vol.canonicalize().unwrap().join("logs/app"));
        assert!(got.is_dir());
        assert_eq!(resolve(&vol, "./logs/app", true).unwrap(), got);
    }

    #[test]
    fn absolute_and_backstepping_paths_are_refused() {
        let (_tmp, vol) = volume();
        for (sub, want) in [
            ("/", SubPathError::Absolute("/".into())),
            ("/etc", SubPathError::Absolute("/etc".into())),
            ("..", SubPathError::Backsteps("..".into())),
            ("a/../../x", SubPathError::Backsteps("a/../../x".into())),
        ] {
            assert_eq!(resolve(&vol, sub, true), Err(want), "{sub}");
        }
        assert!(
            !vol.join("a").exists(),
            "nothing created for a refused path"
        );
    }

    #[test]
    fn symlinks_out_of_the_volume_are_refused_and_nothing_is_made_through_them() {
        let (tmp, vol) = volume();
        let outside = tmp.path().join("host-etc");
        std::fs::create_dir(&outside).unwrap();
        symlink(&outside, vol.join("escape")).unwrap();
        symlink("/", vol.join("root")).unwrap();
        for sub in ["escape", "escape/new", "root", "root/tmp"] {
            match resolve(&vol, sub, true) {
                Err(SubPathError::Outside { .. }) => {}
                other => panic!("{sub}: {other:?}"),
            }
        }
        assert!(!outside.join("new").exists(), "a directory made outside");
        // A symlink that stays inside the volume is fine.
        std::fs::create_dir(vol.join("real")).unwrap();
        symlink("real", vol.join("alias")).unwrap();
        let inside = resolve(&vol, "alias", false).unwrap();
        assert_eq!(inside, vol.canonicalize().unwrap().join("real"));
    }
}
