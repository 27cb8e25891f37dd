//! Reading snapshots: checked whole before anything is written, restored into a new data
//! directory (SQLite) or read for a restore into etcd.

use super::{atomically, carried, close, io, sql, store_err, SnapshotError, Summary, FORMAT};
use crate::datadir;
use crate::{Rev, DB_FILE};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

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
    // A snapshot from a newer server: its schema is not this one's.
    crate::sqlite::schema_version(conn, path).map_err(store_err(path))?;
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| not(e.to_string()))?;
    if integrity != "ok" {
        return Err(not(format!("integrity check: {integrity}")));
    }
    crate::sqlite::highest_rev(conn).map_err(|e| not(e.to_string()))
}

/// Opens `file` read-only if it is a whole snapshot; returns it with its revision.
fn open_snapshot(file: &Path) -> Result<(Connection, Rev), SnapshotError> {
    if !file.is_file() {
        return Err(io(file)(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file",
        )));
    }
    let conn =
        Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
            SnapshotError::NotSnapshot {
                path: file.to_path_buf(),
                why: e.to_string(),
            }
        })?;
    let rev = check(&conn, file)?;
    Ok((conn, rev))
}

/// Makes `data_dir` (new, or without a store) a data directory serving the snapshot `file`:
/// its objects at revision (snapshot's + `bump`) with no history, and its credentials.
pub fn restore(file: &Path, data_dir: &Path, bump: Rev) -> Result<Summary, SnapshotError> {
    // Checked before the directory is touched: a wrong file leaves nothing behind.
    drop(open_snapshot(file)?);
    let _lock = datadir::lock(data_dir)?;
    let db = data_dir.join(DB_FILE);
    if db.exists() {
        return Err(SnapshotError::NotEmpty(data_dir.to_path_buf()));
    }
    // The store appears last: until then the directory holds no store, and a failed restore
    // can simply be run again.
    atomically(&db, |tmp| restore_into(file, data_dir, tmp, bump))
}

fn restore_into(
    file: &Path,
    data_dir: &Path,
    tmp: &Path,
    bump: Rev,
) -> Result<Summary, SnapshotError> {
    // Opened before the copy is made, so that a snapshot gone meanwhile (a scheduled one past
    // its retention) is named as what is missing, not the copy.
    let mut src = std::fs::File::open(file).map_err(io(file))?;
    let mut dst = datadir::private_file(tmp).map_err(io(tmp))?;
    std::io::copy(&mut src, &mut dst).map_err(io(tmp))?;
    drop(dst);
    let conn = Connection::open(tmp).map_err(sql(tmp))?;
    let e = sql(tmp);
    let rev = check(&conn, file)?.saturating_add(bump);
    let files = files_of(&conn).map_err(&e)?;
    write_files(file, data_dir, &files, true)?;
    conn.execute_batch(&format!(
        "DELETE FROM history;
         DROP TABLE files;
         DELETE FROM meta WHERE name LIKE 'snapshot_%';
         INSERT OR REPLACE INTO meta (name, value) VALUES ('rev', {rev});
         PRAGMA journal_mode=WAL;"
    ))
    .map_err(&e)?;
    close(conn, tmp, rev, files.len())
}

/// Writes the carried files into `data_dir` (0600). Only plain names of carried kinds, all
/// checked before any is written: a crafted snapshot cannot write outside the directory.
/// Unless `replace`, a file there with other content is refused (another cluster's CA).
fn write_files(
    file: &Path,
    data_dir: &Path,
    files: &[(String, Vec<u8>)],
    replace: bool,
) -> Result<(), SnapshotError> {
    if let Some((name, _)) = files.iter().find(|(n, _)| n.contains('/') || !carried(n)) {
        return Err(SnapshotError::NotSnapshot {
            path: file.to_path_buf(),
            why: format!("it carries a file named {name:?}"),
        });
    }
    for (name, content) in files {
        let path = data_dir.join(name);
        match std::fs::read(&path) {
            Ok(there) if there == *content => continue,
            Ok(_) if !replace => return Err(SnapshotError::Differs(path)),
            _ => {}
        }
        let _ = std::fs::remove_file(&path);
        let mut f = datadir::private_file(&path).map_err(io(&path))?;
        std::io::Write::write_all(&mut f, content).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))?;
    }
    Ok(())
}

/// A snapshot's contents, for a restore into another store (etcd).
pub struct Contents {
    pub rev: Rev,
    /// (key, JSON) of each object.
    pub objects: Vec<(String, bytes::Bytes)>,
    files: Vec<(String, Vec<u8>)>,
}

/// Reads a whole snapshot.
pub fn read(file: &Path) -> Result<Contents, SnapshotError> {
    let (conn, rev) = open_snapshot(file)?;
    let e = sql(file);
    let files = files_of(&conn).map_err(&e)?;
    let mut stmt = conn
        .prepare("SELECT key, value FROM objects ORDER BY key")
        .map_err(&e)?;
    let objects = stmt
        .query_map([], |r| {
            let json = match r.get_ref(1)? {
                rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => {
                    bytes::Bytes::copy_from_slice(b)
                }
                _ => bytes::Bytes::new(),
            };
            Ok((r.get::<_, String>(0)?, json))
        })
        .map_err(&e)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(&e)?;
    Ok(Contents {
        rev,
        objects,
        files,
    })
}

impl Contents {
    /// Writes the carried files into `data_dir` (the data directory of the servers that will
    /// serve the restored store), locked meanwhile; files already there must be the same.
    pub fn write_files(&self, file: &Path, data_dir: &Path) -> Result<usize, SnapshotError> {
        let _lock = datadir::lock(data_dir)?;
        write_files(file, data_dir, &self.files, false)?;
        Ok(self.files.len())
    }
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
