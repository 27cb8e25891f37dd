//! Writing snapshots: a copy of the SQLite store by the online backup, or objects read from
//! etcd; the data directory's credentials beside them.

use super::{atomically, carried, close, io, sql, store_err, SnapshotError, Summary, FORMAT};
use crate::datadir;
use crate::{Rev, DB_FILE};
use rusqlite::{params, Connection, OpenFlags};
use std::path::Path;
use std::time::Duration;

/// Copies the store in `data_dir` (its server may be running) and the data directory's
/// credentials into `out` (0600: it holds Secrets and the CA key). `out` appears only complete.
pub fn save(data_dir: &Path, out: &Path) -> Result<Summary, SnapshotError> {
    let db = data_dir.join(DB_FILE);
    if !db.is_file() {
        return Err(SnapshotError::NoStore(db));
    }
    atomically(out, |tmp| {
        let dst = backup(&db, tmp)?;
        let rev = crate::sqlite::highest_rev(&dst).map_err(sql(tmp))?;
        finish(dst, tmp, data_dir, rev)
    })
}

/// A snapshot of objects read elsewhere (etcd), at revision `rev`: `(key, resourceVersion,
/// JSON)`, with the credentials of `data_dir`.
pub fn save_objects(
    data_dir: &Path,
    out: &Path,
    rev: Rev,
    objects: &[(String, Rev, bytes::Bytes)],
) -> Result<Summary, SnapshotError> {
    atomically(out, |tmp| {
        datadir::private_file(tmp).map_err(io(tmp))?;
        // The store's own schema, made by the backend that reads it.
        drop(crate::SqliteBackend::open(tmp).map_err(store_err(tmp))?);
        let mut conn = Connection::open(tmp).map_err(sql(tmp))?;
        let e = sql(tmp);
        let tx = conn.transaction().map_err(&e)?;
        {
            let mut put = tx
                .prepare("INSERT OR REPLACE INTO objects (key, rev, value) VALUES (?1, ?2, ?3)")
                .map_err(&e)?;
            for (key, rv, json) in objects {
                put.execute(params![key, *rv as i64, &json[..]])
                    .map_err(&e)?;
            }
        }
        tx.commit().map_err(&e)?;
        finish(conn, tmp, data_dir, rev)
    })
}

/// The store file `db` copied into `tmp` with SQLite's online backup.
fn backup(db: &Path, tmp: &Path) -> Result<Connection, SnapshotError> {
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
    Ok(dst)
}

/// Makes the copy a snapshot at `rev`: no history (a restore marks it compacted), the data
/// directory's credentials, the format mark; one file, synced.
fn finish(
    dst: Connection,
    tmp: &Path,
    data_dir: &Path,
    rev: Rev,
) -> Result<Summary, SnapshotError> {
    let e = sql(tmp);
    dst.execute_batch(
        "PRAGMA journal_mode=DELETE;
         DELETE FROM history;
         CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, content BLOB NOT NULL);",
    )
    .map_err(&e)?;
    let mut files = 0;
    let entries = match std::fs::read_dir(data_dir) {
        Ok(d) => d.collect::<Result<Vec<_>, _>>().map_err(io(data_dir))?,
        // On etcd the data directory may be elsewhere: objects only.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(io(data_dir)(err)),
    };
    for entry in entries {
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
        crate::sqlite::now_secs()
    ))
    .map_err(&e)?;
    close(dst, tmp, rev, files)
}
