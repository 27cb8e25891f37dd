//! Snapshots of the SQLite store: one SQLite file holding the committed objects of one moment
//! and the data directory's credentials (CA, service-account key, tokens), so a server restored
//! from it keeps its cluster's identities: kubeconfigs, node certificates and tokens go on
//! working.
//!
//! `save` copies a running server's store with SQLite's online backup (one read transaction:
//! one committed state, while the writer goes on). `restore` makes a new data directory whose
//! revision is bumped past any the old server can have issued since, with its history marked
//! compacted, as etcd's `snapshot restore --bump-revision --mark-compacted`: a client resuming
//! a watch from a resourceVersion of the old server gets 410 Gone and relists.

use super::datadir::{self, DataDirError};
use super::{Rev, DB_FILE};
use rusqlite::{params, Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `path` with `.part` appended: written there, renamed into place once complete.
fn part(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

/// The highest revision the store file records (as `SqliteBackend::load` reads it).
fn revision(conn: &Connection) -> rusqlite::Result<Rev> {
    conn.query_row(
        "SELECT MAX(COALESCE((SELECT value FROM meta WHERE name='rev'), 0),
                    COALESCE((SELECT MAX(rev) FROM objects), 0),
                    COALESCE((SELECT MAX(rev) FROM history), 0))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|r| r.max(0) as Rev)
}

/// Copies the store in `data_dir` (its server may be running) and the data directory's
/// credentials into `out` (0600: it holds Secrets and the CA key). `out` appears only complete.
pub fn save(data_dir: &Path, out: &Path) -> Result<Summary, SnapshotError> {
    let db = data_dir.join(DB_FILE);
    if !db.is_file() {
        return Err(SnapshotError::NoStore(db));
    }
    let tmp = part(out);
    let _ = std::fs::remove_file(&tmp);
    let result = write_snapshot(data_dir, &db, &tmp);
    let summary = match result {
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

fn write_snapshot(data_dir: &Path, db: &Path, tmp: &Path) -> Result<Summary, SnapshotError> {
    datadir::private_file(tmp).map_err(io(tmp))?;
    let src =
        Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(sql(db))?;
    src.busy_timeout(Duration::from_secs(10)).map_err(sql(db))?;
    let mut dst = Connection::open(tmp).map_err(sql(tmp))?;
    {
        let backup = rusqlite::backup::Backup::new(&src, &mut dst).map_err(sql(tmp))?;
        // All pages in one step: one read transaction, so one committed state. In WAL mode
        // it does not hold the server's writer back.
        loop {
            match backup.step(-1).map_err(sql(db))? {
                rusqlite::backup::StepResult::Done => break,
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    let e = sql(tmp);
    let rev = revision(&dst).map_err(&e)?;
    // History is not carried: a restore marks it compacted.
    dst.execute_batch(
        "PRAGMA journal_mode=DELETE;
         DELETE FROM history;
         CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, content BLOB NOT NULL);",
    )
    .map_err(&e)?;
    let mut files = 0;
    for entry in std::fs::read_dir(data_dir).map_err(io(data_dir))? {
        let entry = entry.map_err(io(data_dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !carried(&name) || !entry.file_type().map_err(io(data_dir))?.is_file() {
            continue;
        }
        let content = std::fs::read(entry.path()).map_err(io(&entry.path()))?;
        dst.execute(
            "INSERT OR REPLACE INTO files (name, content) VALUES (?1, ?2)",
            params![name, content],
        )
        .map_err(&e)?;
        files += 1;
    }
    dst.execute_batch(&format!(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('rev', {rev});
         INSERT OR REPLACE INTO meta (name, value) VALUES ('snapshot_format', {FORMAT});
         INSERT OR REPLACE INTO meta (name, value) VALUES ('snapshot_time', {});
         VACUUM;",
        now_secs()
    ))
    .map_err(&e)?;
    let objects = count(&dst, "objects").map_err(&e)?;
    drop(dst);
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

/// Checks that `conn` is a snapshot and whole; returns its revision.
fn check(conn: &Connection, path: &Path) -> Result<Rev, SnapshotError> {
    let not = |why: String| SnapshotError::NotSnapshot {
        path: path.to_path_buf(),
        why,
    };
    let format: i64 = conn
        .query_row(
            "SELECT value FROM meta WHERE name = 'snapshot_format'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => not("no snapshot_format; a store file?".into()),
            e => not(e.to_string()),
        })?;
    if format != FORMAT {
        return Err(not(format!(
            "format {format}; this keelson-apiserver reads format {FORMAT}"
        )));
    }
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| not(e.to_string()))?;
    if integrity != "ok" {
        return Err(not(format!("integrity check: {integrity}")));
    }
    revision(conn).map_err(|e| not(e.to_string()))
}

/// Makes `data_dir` (new, or without a store) a data directory serving the snapshot `file`:
/// its objects at revision (snapshot's + `bump`) with no history, and its credentials.
pub fn restore(file: &Path, data_dir: &Path, bump: Rev) -> Result<Summary, SnapshotError> {
    if !file.is_file() {
        return Err(SnapshotError::Io {
            path: file.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    // Checked before the directory is touched: a wrong file leaves nothing behind.
    {
        let conn =
            Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
                SnapshotError::NotSnapshot {
                    path: file.to_path_buf(),
                    why: e.to_string(),
                }
            })?;
        check(&conn, file)?;
    }
    let _lock = datadir::lock(data_dir)?;
    let db = data_dir.join(DB_FILE);
    if db.exists() {
        return Err(SnapshotError::NotEmpty(data_dir.to_path_buf()));
    }
    let tmp = part(&db);
    let _ = std::fs::remove_file(&tmp);
    let result = restore_into(file, data_dir, &tmp, bump);
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    // The store appears last: until then the directory holds no store, and a failed restore
    // can simply be run again.
    std::fs::rename(&tmp, &db).map_err(io(&db))?;
    sync_dir(&db)?;
    Ok(summary)
}

fn restore_into(
    file: &Path,
    data_dir: &Path,
    tmp: &Path,
    bump: Rev,
) -> Result<Summary, SnapshotError> {
    datadir::private_file(tmp).map_err(io(tmp))?;
    std::fs::copy(file, tmp).map_err(io(tmp))?;
    // fs::copy takes the source's mode; the store is the owner's only.
    std::fs::set_permissions(tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(io(tmp))?;
    let conn = Connection::open(tmp).map_err(sql(tmp))?;
    let e = sql(tmp);
    let rev = check(&conn, file)?.saturating_add(bump);
    let carried_files = files_of(&conn).map_err(&e)?;
    // Only plain names of carried kinds, all checked before any is written: a crafted
    // snapshot cannot write outside the data directory.
    if let Some((name, _)) = carried_files
        .iter()
        .find(|(n, _)| n.contains('/') || !carried(n))
    {
        return Err(SnapshotError::NotSnapshot {
            path: file.to_path_buf(),
            why: format!("it carries a file named {name:?}"),
        });
    }
    for (name, content) in &carried_files {
        let path = data_dir.join(name);
        let _ = std::fs::remove_file(&path);
        let mut f = datadir::private_file(&path).map_err(io(&path))?;
        std::io::Write::write_all(&mut f, content).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))?;
    }
    conn.execute_batch(&format!(
        "DELETE FROM history;
         DROP TABLE files;
         DELETE FROM meta WHERE name LIKE 'snapshot_%';
         INSERT OR REPLACE INTO meta (name, value) VALUES ('rev', {rev});
         PRAGMA journal_mode=WAL;"
    ))
    .map_err(&e)?;
    let objects = count(&conn, "objects").map_err(&e)?;
    drop(conn);
    std::fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(tmp))?;
    Ok(Summary {
        rev,
        objects,
        files: carried_files.len(),
    })
}

/// The carried files: (name, content), whatever SQLite type the content was written as.
fn files_of(conn: &Connection) -> rusqlite::Result<Vec<(String, Vec<u8>)>> {
    use rusqlite::types::ValueRef;
    let mut stmt = conn.prepare("SELECT name, content FROM files")?;
    let rows = stmt.query_map([], |r| {
        let content = match r.get_ref(1)? {
            ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
            _ => Vec::new(),
        };
        Ok((r.get::<_, String>(0)?, content))
    })?;
    rows.collect()
}

/// Scheduled snapshots: `keelson-snapshot-<UTC time>.db` in `dir`, of which the newest
/// `retention` are kept (0 keeps all). Returns the new file.
pub fn scheduled(data_dir: &Path, dir: &Path, retention: usize) -> Result<PathBuf, SnapshotError> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(io(dir))?;
    let name = chrono::Utc::now().format("keelson-snapshot-%Y%m%dT%H%M%S%.3fZ.db");
    let out = dir.join(name.to_string());
    save(data_dir, &out)?;
    if retention > 0 {
        for old in scheduled_files(dir)?.iter().rev().skip(retention) {
            std::fs::remove_file(old).map_err(io(old))?;
        }
    }
    Ok(out)
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
