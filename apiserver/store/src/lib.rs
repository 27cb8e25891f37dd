//! Storage: the committed objects in memory, a durable backend behind a trait, one writer thread
//! that commits concurrent writes in batches, and the watch history served from memory.

pub mod datadir;
pub mod etcd;
mod memory;
pub mod quarantine;
pub mod snapshot;
mod sqlite;
mod watch;
mod write;
mod writer;

pub use etcd::EtcdConfig;
pub use sqlite::SqliteBackend;
pub use watch::{Subscription, WatchCache};
pub use writer::{Store, WatchStart};

use bytes::Bytes;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// The database file in the data directory.
pub const DB_FILE: &str = "store.db";

/// The cluster-wide, increasing resourceVersion.
pub type Rev = u64;

/// One stored object: the exact JSON served to clients, and its parsed form on demand.
///
/// The store keeps the bytes only (an object held once); a copy handed to a request parses
/// them on first use of `obj` and keeps that parse for as long as the copy lives.
#[derive(Debug, Clone)]
pub struct Entry {
    pub rev: Rev,
    pub obj: Parsed,
    pub json: Bytes,
}

impl Entry {
    pub fn new(rev: Rev, obj: Value) -> Entry {
        let json = encode(&obj);
        let cell = OnceLock::new();
        let _ = cell.set(Arc::new(obj));
        Entry {
            rev,
            obj: Parsed {
                json: json.clone(),
                cell,
            },
            json,
        }
    }

    /// An entry from stored bytes, parsed only when used.
    pub fn from_json(rev: Rev, json: Bytes) -> Entry {
        Entry {
            rev,
            obj: Parsed {
                json: json.clone(),
                cell: OnceLock::new(),
            },
            json,
        }
    }

    /// The parsed form without keeping it here: for entries shared with the store or the watch
    /// history, which must stay bytes only.
    pub fn value(&self) -> Arc<Value> {
        match self.obj.cell.get() {
            Some(v) => v.clone(),
            None => Arc::new(serde_json::from_slice(&self.json).unwrap_or(Value::Null)),
        }
    }

    /// The same object without its parsed form: what the store and the watch history keep.
    pub fn slim(&self) -> Entry {
        Entry::from_json(self.rev, self.json.clone())
    }
}

/// An object's compact JSON in an allocation of its own size, to be held by the store.
///
/// `serde_json::to_vec` doubles its buffer as it grows and `Bytes::from(Vec)` keeps that
/// capacity: a 1.5 kB pod held 2 kB, 27 MiB more at 50,000 pods (`scripts/bench apiserver
/// scale`). Encoding into a per-thread buffer and copying out also saves the growth steps.
pub fn encode(obj: &Value) -> Bytes {
    // Past this size the buffer is let go, so one large object does not pin it per thread.
    const KEEP: usize = 64 * 1024;
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        buf.clear();
        let json = match serde_json::to_writer(&mut *buf, obj) {
            Ok(()) => Bytes::copy_from_slice(buf),
            Err(_) => Bytes::new(),
        };
        if buf.capacity() > KEEP {
            *buf = Vec::new();
        }
        json
    })
}

/// An object's parsed form, made from its bytes on first use.
#[derive(Debug, Clone)]
pub struct Parsed {
    json: Bytes,
    cell: OnceLock<Arc<Value>>,
}

impl std::ops::Deref for Parsed {
    type Target = Value;

    fn deref(&self) -> &Value {
        // The bytes were checked when stored or loaded (see `Store::open`); a failure here
        // would be a bug, and shows as an empty object rather than a panic.
        self.cell
            .get_or_init(|| Arc::new(serde_json::from_slice(&self.json).unwrap_or(Value::Null)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    fn code(self) -> i64 {
        match self {
            EventType::Added => 0,
            EventType::Modified => 1,
            EventType::Deleted => 2,
        }
    }

    fn from_code(c: i64) -> EventType {
        match c {
            0 => EventType::Added,
            1 => EventType::Modified,
            _ => EventType::Deleted,
        }
    }
}

/// A committed change, as watchers see it.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: EventType,
    pub key: String,
    /// The new object, or for a deletion the last state with the deletion's resourceVersion.
    pub entry: Entry,
    /// The object before this change, where known; used to turn selector transitions into
    /// ADDED/DELETED for filtered watches.
    pub prev: Option<Entry>,
}

/// What must hold for a write to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Create: fails with AlreadyExists if the key exists.
    MustNotExist,
    /// Update or delete of whatever is there; fails with NotFound if absent.
    MustExist,
    /// Compare-and-swap on the object's current resourceVersion.
    Rev(Rev),
}

#[derive(Debug, Clone)]
pub struct Write {
    pub key: String,
    /// None deletes the key.
    pub value: Option<Value>,
    pub precondition: Precondition,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum StoreError {
    #[error("already exists")]
    AlreadyExists,
    #[error("not found")]
    NotFound,
    #[error("the object has been modified; current resourceVersion is {current}")]
    Conflict { current: Rev },
    #[error("storage error: {0}")]
    Backend(String),
    /// The storage did not answer (etcd down or without quorum): retry later (503).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("the store is shutting down")]
    Closed,
}

/// One change as the backend persists it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rev: Rev,
    pub key: String,
    pub kind: EventType,
    pub json: Bytes,
}

/// One stored object as the backend holds it, not yet checked.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: String,
    pub rev: Rev,
    pub json: Bytes,
}

/// What a backend holds at start.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rev: Rev,
    pub objects: Vec<Row>,
    /// Recent changes, oldest first, for watch history across restarts.
    pub events: Vec<Change>,
}

/// Whether a stored object (by key) is one the server can serve: its kind decodes it. The
/// reason is logged and kept with a quarantined row.
pub type Check = fn(&str, &Value) -> Result<(), String>;

/// A stored object moved aside at load, because the server could not decode it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    pub key: String,
    pub rev: Rev,
    pub reason: String,
    /// Unix seconds when it was moved aside.
    pub at: i64,
    pub json: Bytes,
}

/// Durable storage. Implementations commit a batch atomically: all or nothing.
pub trait Backend: Send + 'static {
    fn load(&mut self, history_seconds: u64) -> Result<Loaded, StoreError>;
    /// Moves the rows of these keys out of the served objects, each with its reason.
    fn quarantine(&mut self, rows: &[(Row, String)]) -> Result<(), StoreError>;
    fn commit(&mut self, rev: Rev, changes: &[Change]) -> Result<(), StoreError>;
    /// Drops persisted history older than the given age; returns the oldest revision kept.
    fn prune_history(&mut self, history_seconds: u64) -> Result<(), StoreError>;
}

/// Sets metadata.resourceVersion in a stored object.
pub fn set_resource_version(obj: &mut Value, rev: Rev) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}

#[cfg(test)]
mod etcd_tests;
#[cfg(test)]
mod suite;
#[cfg(test)]
mod tests;
