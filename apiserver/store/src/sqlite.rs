//! The embedded default backend: SQLite in WAL mode with synchronous=FULL, so an acknowledged
//! batch survives kill -9 and power loss.

use super::{Backend, Change, EventType, Loaded, Quarantined, Rev, Row, StoreError};
use bytes::Bytes;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct SqliteBackend {
    conn: Connection,
}

/// The store's schema version (`PRAGMA user_version`), which this server writes.
pub const SCHEMA_VERSION: i64 = 1;

/// Forward migrations: entry `i` takes a store from schema version `i` to `i + 1`, run in one
/// transaction with the version bump. Version 0 is a new file or one from before versions were
/// kept, whose tables the `CREATE TABLE IF NOT EXISTS` above already made what version 1 is.
const MIGRATIONS: &[&str] = &[""];

/// The store's schema version; a store from a newer server is refused (before anything is
/// written to it).
pub fn schema_version(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Backend(format!(
            "{}: schema version {version} was written by a newer keelson-apiserver (this one \
             knows up to {SCHEMA_VERSION}); going back is not supported: run the newer \
             release, or restore a snapshot taken before the upgrade into a new --data-dir",
            path.display()
        )));
    }
    Ok(version)
}

/// Brings the store's schema from `version` up to `SCHEMA_VERSION`.
fn migrate(conn: &mut Connection, version: i64) -> Result<(), StoreError> {
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction().map_err(err)?;
    for step in MIGRATIONS.iter().skip(version.max(0) as usize) {
        tx.execute_batch(step).map_err(err)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(err)?;
    tx.commit().map_err(err)?;
    if version > 0 {
        tracing::info!(from = version, to = SCHEMA_VERSION, "store schema migrated");
    }
    Ok(())
}

/// The highest revision anywhere in a store file: a lost or garbled meta row never takes it
/// backwards.
pub(crate) fn highest_rev(conn: &Connection) -> rusqlite::Result<Rev> {
    conn.query_row(
        "SELECT MAX(COALESCE((SELECT value FROM meta WHERE name='rev'), 0),
                    COALESCE((SELECT MAX(rev) FROM objects), 0),
                    COALESCE((SELECT MAX(rev) FROM history), 0))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|r| r.max(0) as Rev)
}

fn err(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A column's bytes whatever SQLite type it was written as (the sqlite3 shell writes text):
/// what they hold is judged by the caller, so a row written by hand cannot stop the load.
fn bytes(r: &rusqlite::Row<'_>, i: usize) -> Bytes {
    match r.get_ref(i) {
        Ok(ValueRef::Blob(b) | ValueRef::Text(b)) => Bytes::copy_from_slice(b),
        _ => Bytes::new(),
    }
}

fn text(r: &rusqlite::Row<'_>, i: usize) -> String {
    match r.get_ref(i) {
        Ok(ValueRef::Integer(n)) => n.to_string(),
        _ => String::from_utf8_lossy(&bytes(r, i)).into_owned(),
    }
}

pub(crate) fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl SqliteBackend {
    pub fn open(path: &Path) -> Result<SqliteBackend, StoreError> {
        // Made 0600 before SQLite opens it: its WAL and shared-memory files take the same mode.
        super::datadir::private_file(path)
            .map_err(|e| StoreError::Backend(format!("{}: {e}", path.display())))?;
        let mut conn = Connection::open(path).map_err(err)?;
        let version = schema_version(&conn, path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, rev INTEGER NOT NULL, value BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS history (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, type INTEGER NOT NULL, value BLOB NOT NULL, ts INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS quarantine (key TEXT PRIMARY KEY, rev INTEGER NOT NULL, value BLOB NOT NULL, reason TEXT NOT NULL, ts INTEGER NOT NULL);",
        )
        .map_err(err)?;
        migrate(&mut conn, version)?;
        Ok(SqliteBackend { conn })
    }
}

impl Backend for SqliteBackend {
    fn load(&mut self, history_seconds: u64) -> Result<Loaded, StoreError> {
        let mut out = Loaded {
            rev: highest_rev(&self.conn).unwrap_or(0),
            ..Loaded::default()
        };
        let mut stmt = self
            .conn
            .prepare("SELECT key, rev, value FROM objects")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Row {
                    key: text(r, 0),
                    rev: r.get::<_, i64>(1).unwrap_or(0) as Rev,
                    json: bytes(r, 2),
                })
            })
            .map_err(err)?;
        for row in rows {
            out.objects.push(row.map_err(err)?);
        }
        let since = now_secs() - history_seconds as i64;
        let mut stmt = self
            .conn
            .prepare("SELECT rev, key, type, value FROM history WHERE ts >= ?1 ORDER BY rev")
            .map_err(err)?;
        let rows = stmt
            .query_map([since], |r| {
                Ok(Change {
                    rev: r.get::<_, i64>(0)? as Rev,
                    key: text(r, 1),
                    kind: EventType::from_code(r.get(2).unwrap_or(-1)),
                    json: bytes(r, 3),
                })
            })
            .map_err(err)?;
        for row in rows {
            out.events.push(row.map_err(err)?);
        }
        Ok(out)
    }

    fn quarantine(&mut self, rows: &[(Row, String)]) -> Result<(), StoreError> {
        let ts = now_secs();
        let tx = self.conn.transaction().map_err(err)?;
        for (row, reason) in rows {
            tx.execute(
                "INSERT OR REPLACE INTO quarantine (key, rev, value, reason, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![row.key, row.rev as i64, &row.json[..], reason, ts],
            )
            .map_err(err)?;
            tx.execute("DELETE FROM objects WHERE key = ?1", params![row.key])
                .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    fn commit(&mut self, rev: Rev, changes: &[Change]) -> Result<(), StoreError> {
        let ts = now_secs();
        let tx = self.conn.transaction().map_err(err)?;
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO objects (key, rev, value) VALUES (?1, ?2, ?3)",
                )
                .map_err(err)?;
            let mut del = tx
                .prepare_cached("DELETE FROM objects WHERE key = ?1")
                .map_err(err)?;
            let mut hist = tx
                .prepare_cached(
                    "INSERT INTO history (rev, key, type, value, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(err)?;
            for c in changes {
                match c.kind {
                    EventType::Deleted => del.execute(params![c.key]).map_err(err)?,
                    _ => put
                        .execute(params![c.key, c.rev as i64, &c.json[..]])
                        .map_err(err)?,
                };
                hist.execute(params![c.rev as i64, c.key, c.kind.code(), &c.json[..], ts])
                    .map_err(err)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('rev', ?1)",
                params![rev as i64],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    fn prune_history(&mut self, history_seconds: u64) -> Result<(), StoreError> {
        let before = now_secs() - history_seconds as i64;
        self.conn
            .execute("DELETE FROM history WHERE ts < ?1", [before])
            .map_err(err)?;
        Ok(())
    }
}

/// The admin side of the quarantine: listing and deleting rows, on an existing store (the
/// server may be running: it reads the quarantine only at start).
impl SqliteBackend {
    pub fn open_existing(path: &Path) -> Result<SqliteBackend, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Backend(format!(
                "no store at {}",
                path.display()
            )));
        }
        SqliteBackend::open(path)
    }

    pub fn quarantined(&self) -> Result<Vec<Quarantined>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, rev, reason, ts, value FROM quarantine ORDER BY key")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Quarantined {
                    key: text(r, 0),
                    rev: r.get::<_, i64>(1).unwrap_or(0) as Rev,
                    reason: text(r, 2),
                    at: r.get(3).unwrap_or(0),
                    json: bytes(r, 4),
                })
            })
            .map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    /// Deletes one quarantined row; false when there is none with that key.
    pub fn delete_quarantined(&self, key: &str) -> Result<bool, StoreError> {
        let n = self
            .conn
            .execute("DELETE FROM quarantine WHERE key = ?1", [key])
            .map_err(err)?;
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_version(path: &Path) -> i64 {
        let conn = Connection::open(path).unwrap();
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_store_from_before_schema_versions_is_migrated_and_keeps_its_objects() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        {
            let mut b = SqliteBackend::open(&path).unwrap();
            let json = bytes::Bytes::from_static(br#"{"metadata":{"name":"a"}}"#);
            let change = Change {
                rev: 1,
                key: "/k/a".into(),
                kind: EventType::Added,
                json,
            };
            b.commit(1, &[change]).unwrap();
        }
        // As a server from before versions were kept left it.
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 0).unwrap();
        drop(conn);
        let mut b = SqliteBackend::open(&path).unwrap();
        assert_eq!(user_version(&path), SCHEMA_VERSION);
        assert_eq!(b.load(0).unwrap().objects.len(), 1);
    }

    #[test]
    fn a_store_from_a_newer_server_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = SqliteBackend::open(&path).err().unwrap().to_string();
        assert!(
            err.contains("written by a newer keelson-apiserver"),
            "{err}"
        );
        assert_eq!(user_version(&path), SCHEMA_VERSION + 1);
        let conn = Connection::open(&path).unwrap();
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0, "nothing created in it");
    }
}
