//! The audit log file, rotated as upstream's (lumberjack) does with --audit-log-maxsize and
//! --audit-log-maxbackup: past the size the file is renamed to NAME-<UTC time>.EXT and a new
//! one begins; beyond the count the oldest backups are deleted.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// When to rotate, and how many old files to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rotation {
    /// Bytes before a new file begins; 0 never rotates.
    pub max_bytes: u64,
    /// Old files kept; 0 keeps them all.
    pub max_backups: usize,
}

/// A log file that rotates itself; written only by the audit writer.
pub struct LogFile {
    path: PathBuf,
    file: File,
    size: u64,
    rotation: Rotation,
}

impl LogFile {
    /// Opens (or creates, with its folder, as upstream does) the log for appending.
    pub fn open(path: &Path, rotation: Rotation) -> std::io::Result<LogFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.into(),
            file,
            size,
            rotation,
        })
    }

    /// Moves the file aside and starts a new one when `next` more bytes would pass the size.
    fn rotate_for(&mut self, next: u64) -> std::io::Result<()> {
        let max = self.rotation.max_bytes;
        if max == 0 || self.size == 0 || self.size.saturating_add(next) <= max {
            return Ok(());
        }
        self.file.flush()?;
        std::fs::rename(&self.path, backup_name(&self.path, chrono::Utc::now()))?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        self.prune();
        Ok(())
    }

    /// Deletes the oldest backups beyond the count (their names sort by time).
    fn prune(&self) {
        if self.rotation.max_backups == 0 {
            return;
        }
        let mut backups = backups(&self.path);
        backups.sort();
        let extra = backups.len().saturating_sub(self.rotation.max_backups);
        for old in backups.iter().take(extra) {
            if let Err(e) = std::fs::remove_file(old) {
                tracing::warn!(file = %old.display(), error = %e, "removing an old audit log failed");
            }
        }
    }
}

impl Write for LogFile {
    /// Writes all of `buf` to one file: the writer hands whole lines, so none is split
    /// across a rotation.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.rotate_for(buf.len() as u64)?;
        self.file.write_all(buf)?;
        self.size = self.size.saturating_add(buf.len() as u64);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// (stem, extension with its dot) of the log's file name: ("audit", ".log").
fn parts(path: &Path) -> (String, String) {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()));
    (stem.unwrap_or_default(), ext.unwrap_or_default())
}

/// NAME-2006-01-02T15-04-05.000.EXT, as lumberjack names a backup (UTC).
fn backup_name(path: &Path, at: chrono::DateTime<chrono::Utc>) -> PathBuf {
    let (stem, ext) = parts(path);
    let time = at.format("%Y-%m-%dT%H-%M-%S%.3f");
    path.with_file_name(format!("{stem}-{time}{ext}"))
}

/// The backups of the log beside it.
fn backups(path: &Path) -> Vec<PathBuf> {
    let (stem, ext) = parts(path);
    let prefix = format!("{stem}-");
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let Ok(entries) = std::fs::read_dir(dir.unwrap_or(Path::new("."))) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| {
                n.starts_with(&prefix) && n.ends_with(&ext) && n.len() > prefix.len() + ext.len()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_past_the_size_and_keeps_the_newest_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_bytes: 100,
            max_backups: 2,
        };
        let mut log = LogFile::open(&path, rotation).unwrap();
        for i in 0..10 {
            log.write_all(format!("{i:059}\n").as_bytes()).unwrap();
            // Backups named to the millisecond: keep them apart.
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        log.flush().unwrap();
        // Each 60-byte line fits once: every write after the first begins a new file.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{:059}\n", 9)
        );
        let mut kept = backups(&path);
        kept.sort();
        assert_eq!(kept.len(), 2, "{kept:?}");
        let newest = std::fs::read_to_string(&kept[1]).unwrap();
        assert_eq!(newest, format!("{:059}\n", 8));
        let name = kept[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("audit-20") && name.ends_with(".log"),
            "{name}"
        );
    }

    #[test]
    fn no_size_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new-folder/audit.log");
        let mut log = LogFile::open(&path, Rotation::default()).unwrap();
        for _ in 0..100 {
            log.write_all(&[b'x'; 100]).unwrap();
        }
        assert!(backups(&path).is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10_000);
    }
}
