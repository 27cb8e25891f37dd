//! The data directory: owned by one server at a time (an flock on a lock file that also holds
//! the owner's PID), readable by root only, since the store holds Secrets in plain text.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "apiserver.lock";

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("--data-dir {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "--data-dir {} is in use by another keelson-apiserver{}; stop it or use another directory",
        path.display(),
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked { path: PathBuf, holder: Option<u32> },
}

/// Held for the server's lifetime: the lock goes with the process, kill -9 included.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Creates the directory (0700), takes its lock and makes every file in it 0600.
pub fn lock(dir: &Path) -> Result<DataDirLock, DataDirError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataDirError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, Permissions::from_mode(0o700)).map_err(io(dir))?;
    let path = dir.join(LOCK_FILE);
    let mut file = private_file(&path).map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            return Err(DataDirError::Locked {
                path: dir.to_path_buf(),
                holder: pid.trim().parse().ok(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
    }
    file.set_len(0).map_err(io(&path))?;
    file.rewind().map_err(io(&path))?;
    writeln!(file, "{}", std::process::id()).map_err(io(&path))?;
    restrict_files(dir)?;
    Ok(DataDirLock { _file: file })
}

/// Opens (creating if needed) a file only its owner may read.
pub fn private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

/// Files left group- or world-readable by an older version become 0600.
pub fn restrict_files(dir: &Path) -> Result<(), DataDirError> {
    let io = |source| DataDirError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let meta = entry.metadata().map_err(io)?;
        if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(entry.path(), Permissions::from_mode(0o600)).map_err(io)?;
        }
    }
    Ok(())
}
