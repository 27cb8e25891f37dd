//! The kubelet's atomic-writer layout for volumes whose files change together (projected
//! service-account tokens): the files live in a hidden `..<timestamp>` folder, `..data` is a
//! symlink to it, and each visible name is a symlink through `..data`. An update writes a new
//! folder and swaps `..data` with one rename, so a reader sees the old set or the new set of
//! files, never a mix or a half-written token.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const DATA_LINK: &str = "..data";
const DATA_LINK_TMP: &str = "..data_tmp";

/// Whether `rel` is a path this writer may create inside the volume.
fn valid(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with('/')
        && !rel.starts_with("..")
        && rel.split('/').all(|p| !p.is_empty() && p != "..")
}

/// Writes `files` (relative path -> contents) into `dir` with `mode`; does nothing when the
/// current contents are already these.
pub fn write(dir: &Path, files: &BTreeMap<String, Vec<u8>>, mode: u32) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let files: BTreeMap<&str, &Vec<u8>> = files
        .iter()
        .filter(|(k, _)| valid(k))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let current = std::fs::read_link(dir.join(DATA_LINK)).ok();
    if current
        .as_ref()
        .is_some_and(|c| same_contents(&dir.join(c), &files))
    {
        return Ok(());
    }
    let stamp = new_stamp_dir(dir)?;
    for (rel, value) in &files {
        let target = stamp.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut f = std::fs::File::create(&target)?;
        f.write_all(value)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
        f.sync_all()?;
    }
    std::fs::set_permissions(&stamp, std::fs::Permissions::from_mode(0o755))?;
    let stamp_name = stamp.file_name().map(PathBuf::from).unwrap_or_default();
    let tmp = dir.join(DATA_LINK_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp_name, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA_LINK))?;
    visible_links(dir, &files)?;
    if let Some(old) = current.filter(|c| *c != stamp_name) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
    Ok(())
}

/// A fresh `..<timestamp>` folder.
fn new_stamp_dir(dir: &Path) -> std::io::Result<PathBuf> {
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S");
    for n in 0..100 {
        let path = dir.join(format!("..{now}.{n}"));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free timestamp folder name"))
}

/// Each top-level name a symlink to `..data/<name>`; other visible names removed.
fn visible_links(dir: &Path, files: &BTreeMap<&str, &Vec<u8>>) -> std::io::Result<()> {
    let tops: Vec<&str> = files.keys().filter_map(|k| k.split('/').next()).collect();
    for top in &tops {
        let link = dir.join(top);
        let want = Path::new(DATA_LINK).join(top);
        if std::fs::read_link(&link).ok().as_deref() == Some(want.as_path()) {
            continue;
        }
        // A plain file or folder from an older layout, or a link elsewhere, is replaced.
        let _ = std::fs::remove_file(&link).or_else(|_| std::fs::remove_dir_all(&link));
        std::os::unix::fs::symlink(&want, &link)?;
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name.as_str()) {
            let _ = std::fs::remove_file(entry.path())
                .or_else(|_| std::fs::remove_dir_all(entry.path()));
        }
    }
    Ok(())
}

/// Whether the folder holds exactly `files`.
fn same_contents(folder: &Path, files: &BTreeMap<&str, &Vec<u8>>) -> bool {
    let mut found = Vec::new();
    if list(folder, folder, &mut found).is_err() {
        return false;
    }
    found.len() == files.len()
        && found.iter().all(|rel| {
            let want = files.get(rel.as_str());
            want.is_some_and(|w| std::fs::read(folder.join(rel)).ok().as_ref() == Some(*w))
        })
}

fn list(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            list(root, &entry.path(), out)?;
        } else if let Ok(rel) = entry.path().strip_prefix(root) {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn swaps_data_link_and_keeps_visible_names_pointing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            d,
            &files(&[("token", "t1"), ("ca.crt", "ca"), ("sub/x", "1")]),
            0o644,
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(d.join("token")).unwrap(), "t1");
        assert_eq!(std::fs::read_to_string(d.join("sub/x")).unwrap(), "1");
        assert_eq!(
            std::fs::read_link(d.join("token")).unwrap(),
            Path::new("..data/token")
        );
        let first = std::fs::read_link(d.join("..data")).unwrap();
        // Same contents: nothing rewritten.
        write(
            d,
            &files(&[("token", "t1"), ("ca.crt", "ca"), ("sub/x", "1")]),
            0o644,
        )
        .unwrap();
        assert_eq!(std::fs::read_link(d.join("..data")).unwrap(), first);
        // New token, one file gone: a new folder, the old one removed.
        write(d, &files(&[("token", "t2"), ("ca.crt", "ca")]), 0o644).unwrap();
        let second = std::fs::read_link(d.join("..data")).unwrap();
        assert_ne!(first, second);
        assert!(!d.join(&first).exists());
        assert_eq!(std::fs::read_to_string(d.join("token")).unwrap(), "t2");
        assert!(!d.join("sub").exists());
        let mode = std::fs::metadata(d.join("token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(".."))
            .collect();
        names.sort();
        assert_eq!(names, vec!["ca.crt", "token"]);
    }

    #[test]
    fn replaces_plain_files_of_the_old_layout_and_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("token"), "old").unwrap();
        write(
            d,
            &files(&[("token", "new"), ("../evil", "x"), ("..data/x", "x")]),
            0o600,
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(d.join("token")).unwrap(), "new");
        assert!(std::fs::symlink_metadata(d.join("token"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!d.parent().unwrap().join("evil").exists());
    }
}
