//! Storage: the committed objects in memory, a durable backend behind a trait, one writer thread
//! that commits concurrent writes in batches, and the watch history served from memory.

mod sqlite;
mod watch;
mod writer;

pub use sqlite::SqliteBackend;
pub use watch::{Subscription, WatchCache};
pub use writer::{Store, WatchStart};

use bytes::Bytes;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The cluster-wide, increasing resourceVersion.
pub type Rev = u64;

/// One stored object: its parsed form and the exact JSON served to clients.
#[derive(Debug, Clone)]
pub struct Entry {
    pub rev: Rev,
    pub obj: Arc<Value>,
    pub json: Bytes,
}

impl Entry {
    pub fn new(rev: Rev, obj: Value) -> Entry {
        let json = Bytes::from(serde_json::to_vec(&obj).unwrap_or_default());
        Entry {
            rev,
            obj: Arc::new(obj),
            json,
        }
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
    pub prev: Option<Arc<Value>>,
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

/// What a backend holds at start.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rev: Rev,
    pub objects: BTreeMap<String, Entry>,
    /// Recent changes, oldest first, for watch history across restarts.
    pub events: Vec<Change>,
}

/// Durable storage. Implementations commit a batch atomically: all or nothing.
pub trait Backend: Send + 'static {
    fn load(&mut self, history_seconds: u64) -> Result<Loaded, StoreError>;
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
mod tests;
