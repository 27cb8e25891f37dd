//! Snapshots of the store (SQLite or etcd): one SQLite file holding the committed objects of
//! one moment and the data directory's credentials (CA, service-account key, tokens), so a
//! server restored from it keeps its cluster's identities: kubeconfigs, node certificates and
//! tokens go on working.
//!
//! `save` copies a running server's store with SQLite's online backup (one read transaction:
//! one committed state, while the writer goes on). `restore` makes a new data directory whose
//! revision is bumped past any the old server can have issued since, with its history marked
//! compacted, as etcd's `snapshot restore --bump-revision --mark-compacted`: a client resuming
//! a watch from a resourceVersion of the old server gets 410 Gone and relists.

use super::datadir::DataDirError;
use super::Rev;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

mod restore;
mod save;

pub use restore::{read, restore, Contents};
pub use save::{save, save_objects};

/// The `snapshot_format` meta row a snapshot carries; a store file has none.
const FORMAT: i64 = 1;

/// What `restore` adds to the snapshot's revision unless told otherwise: more writes than a
/// cluster makes between a snapshot and its restore (etcd's documentation suggests the same).
pub const DEFAULT_BUMP: Rev = 1_000_000_000;

/// Data-directory files that are not the store's and are carried in a snapshot: the PKI, the
/// service-account key, the admin token and kubeconfig, the server's identity.
fn carried(name: &str) -> bool {
    let kinds = [".crt", ".key", ".pub", ".kubeconfig", ".token", ".id"];
    !name.starts_with('.') && kinds.iter().any(|k| name.ends_with(k))
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("no store at {}: is --data-dir the data directory of a keelson-apiserver on the embedded store?", .0.display())]
    NoStore(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Sqlite { path: PathBuf, message: String },
    #[error("{} is not a keelson-apiserver snapshot ({why})", .path.display())]
    NotSnapshot { path: PathBuf, why: String },
    #[error("{} already holds a store; restore into a new, empty data directory", .0.display())]
    NotEmpty(PathBuf),
    #[error("{} exists with other content (another cluster's?); restore into a new data directory", .0.display())]
    Differs(PathBuf),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
}

/// What a snapshot holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The store's revision when the snapshot was taken (after a restore: the new revision).
    pub rev: Rev,
    pub objects: usize,
    /// Data-directory files carried.
    pub files: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} object(s) at revision {}, {} data-directory file(s)",
            self.objects, self.rev, self.files
        )
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> SnapshotError + '_ {
    move |e| SnapshotError::Sqlite {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// `path` with `.part` appended: written there, renamed into place once complete.
fn part(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

/// Writes `out` through `out.part`, renamed into place only once `write` succeeded.
fn atomically(
    out: &Path,
    write: impl FnOnce(&Path) -> Result<Summary, SnapshotError>,
) -> Result<Summary, SnapshotError> {
    let tmp = part(out);
    let _ = std::fs::remove_file(&tmp);
    let summary = match write(&tmp) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, out).map_err(io(out))?;
    sync_dir(out)?;
    Ok(summary)
}

/// A store error about the file at `path`.
fn store_err(path: &Path) -> impl Fn(crate::StoreError) -> SnapshotError + '_ {
    move |e| SnapshotError::Sqlite {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Closes the finished file `tmp` and syncs it: what it holds, counted, at `rev`.
fn close(conn: Connection, tmp: &Path, rev: Rev, files: usize) -> Result<Summary, SnapshotError> {
    let objects = count(&conn, "objects").map_err(sql(tmp))?;
    drop(conn);
    std::fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(tmp))?;
    Ok(Summary {
        rev,
        objects,
        files,
    })
}

fn count(conn: &Connection, table: &str) -> rusqlite::Result<usize> {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as usize)
}

fn sync_dir(file: &Path) -> Result<(), SnapshotError> {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// The name of a new scheduled snapshot in `dir` (made 0700 if missing):
/// `keelson-snapshot-<UTC time>.db`.
pub fn scheduled_name(dir: &Path) -> Result<PathBuf, SnapshotError> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(io(dir))?;
    let name = chrono::Utc::now().format("keelson-snapshot-%Y%m%dT%H%M%S%.3fZ.db");
    Ok(dir.join(name.to_string()))
}

/// Keeps the newest `retention` scheduled snapshots in `dir` (0 keeps all); other files are
/// left alone.
pub fn prune(dir: &Path, retention: usize) -> Result<(), SnapshotError> {
    if retention > 0 {
        for old in scheduled_files(dir)?.iter().rev().skip(retention) {
            std::fs::remove_file(old).map_err(io(old))?;
        }
    }
    Ok(())
}

/// The scheduled snapshots in `dir`, oldest first (their names sort by time).
pub fn scheduled_files(dir: &Path) -> Result<Vec<PathBuf>, SnapshotError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("keelson-snapshot-") && n.ends_with(".db"))
        })
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests;
