//! The Store: reads from committed memory, writes through one thread that batches whatever
//! writes are waiting into one durable commit, then publishes them to memory and watchers.

use super::memory::{checked, decodable, Shared, State};
use super::watch::{Subscription, TooOld};
use super::{
    set_resource_version, Backend, Change, Check, Entry, Event, EventType, Precondition, Rev,
    StoreError, Write,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Most writes committed in one transaction.
const MAX_BATCH: usize = 1024;

type Reply = oneshot::Sender<Result<Entry, StoreError>>;

#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    writer: Writer,
}

/// Where writes go: the local writer thread (SQLite), or etcd transactions whose results come
/// back through the etcd watch that feeds this memory.
#[derive(Clone)]
enum Writer {
    Batch(mpsc::Sender<(Write, Reply)>),
    Etcd(Arc<super::etcd::Remote>),
}

/// Where a watch starts.
pub enum WatchStart {
    /// The current objects (filtered by the caller) as ADDED, then later changes.
    Snapshot(Vec<Entry>, Rev),
    /// Only changes after the revision asked for.
    Resume,
}

impl Store {
    /// Loads the backend, moving aside what `check` refuses, and starts the writer thread.
    pub fn open<B: Backend>(
        mut backend: B,
        history: Duration,
        max_events: usize,
        check: Check,
    ) -> Result<Store, StoreError> {
        let loaded = backend.load(history.as_secs())?;
        let (objects, refused) = checked(loaded.objects, check);
        if !refused.is_empty() {
            backend.quarantine(&refused)?;
            for (row, reason) in &refused {
                tracing::error!(
                    key = %row.key, %reason,
                    "stored object cannot be decoded; moved to quarantine \
                     (keelson-apiserver quarantine list --data-dir ...)"
                );
            }
        }
        let events = history_events(loaded.events, &objects, check);
        let shared = Shared::new(objects, loaded.rev, events, max_events, history);
        let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(backend, s, rx, history))
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Store {
            shared,
            writer: Writer::Batch(tx),
        })
    }

    /// A store over etcd: every object under the prefix loaded into memory, kept current by
    /// etcd's watch; writes are etcd transactions (see `etcd.rs`).
    pub async fn open_etcd(
        cfg: &super::EtcdConfig,
        history: Duration,
        max_events: usize,
        check: Check,
    ) -> Result<Store, StoreError> {
        let (shared, remote) = super::etcd::connect(cfg, history, max_events, check).await?;
        Ok(Store {
            shared,
            writer: Writer::Etcd(remote),
        })
    }

    /// Waits until memory holds every write committed anywhere before this call (a consistent
    /// read, as upstream's reads from the watch cache); at once for the local backend, whose
    /// writes all pass through this process.
    pub async fn sync(&self) -> Result<(), StoreError> {
        match &self.writer {
            Writer::Batch(_) => Ok(()),
            Writer::Etcd(remote) => remote.sync().await,
        }
    }

    /// Gives memory up to 3 s to reach `rev` (as upstream's watch cache before "Too large
    /// resource version"); at once for the local backend, which is never behind.
    pub async fn wait_for(&self, rev: Rev) -> Result<(), StoreError> {
        match &self.writer {
            Writer::Batch(_) => Ok(()),
            Writer::Etcd(remote) => remote.wait_for(rev).await,
        }
    }

    /// Whether the storage answers: the `etcd` check of /readyz (None for the local backend).
    pub async fn check(&self) -> Option<Result<(), StoreError>> {
        match &self.writer {
            Writer::Batch(_) => None,
            Writer::Etcd(remote) => Some(remote.ready().await),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.shared.read()
    }

    pub fn get(&self, key: &str) -> Option<Entry> {
        self.read().objects.get(key).cloned()
    }

    /// All entries under a key prefix, in key order, and the revision they are current at.
    pub fn list(&self, prefix: &str) -> (Vec<Entry>, Rev) {
        let st = self.read();
        let items = st
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, e)| e.clone())
            .collect();
        (items, st.rev)
    }

    /// `list` with each entry's key.
    pub fn list_keyed(&self, prefix: &str) -> (Vec<(String, Entry)>, Rev) {
        let st = self.read();
        let items = st
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        (items, st.rev)
    }

    /// One page of `list_keyed`: at most `limit` entries after the key `after`, how many follow
    /// them, and the revision. Only the page is copied: a chunked list of a large collection
    /// (kubectl asks 500 at a time) costs each page its own size, not the collection's.
    pub fn page_keyed(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> (Vec<(String, Entry)>, usize, Rev) {
        use std::ops::Bound;
        let st = self.read();
        let start = match after.filter(|a| *a >= prefix) {
            Some(a) => Bound::Excluded(a.to_string()),
            None => Bound::Included(prefix.to_string()),
        };
        let mut rest = st
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        let items: Vec<_> = rest
            .by_ref()
            .take(limit)
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        (items, rest.count(), st.rev)
    }

    pub fn current_rev(&self) -> Rev {
        self.read().rev
    }

    pub fn oldest_rev(&self) -> Rev {
        self.shared.cache.oldest()
    }

    /// Commits one write; returns the stored entry (for a delete, the deleted object).
    pub async fn write(&self, w: Write) -> Result<Entry, StoreError> {
        let tx = match &self.writer {
            Writer::Batch(tx) => tx,
            Writer::Etcd(remote) => return remote.write(w).await,
        };
        let (reply, rx) = oneshot::channel();
        tx.send((w, reply)).await.map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Starts a watch on a key prefix: from a snapshot (rev None) or after a revision.
    pub fn watch(
        &self,
        prefix: &str,
        from: Option<Rev>,
    ) -> Result<(WatchStart, Subscription), TooOld> {
        let hist = self.shared.cache.lock();
        match from {
            None => {
                let (items, rev) = self.list(prefix);
                let sub = self.shared.cache.subscribe(&hist, rev, prefix)?;
                Ok((WatchStart::Snapshot(items, rev), sub))
            }
            Some(rev) => {
                let sub = self.shared.cache.subscribe(&hist, rev, prefix)?;
                Ok((WatchStart::Resume, sub))
            }
        }
    }
}

/// Persisted history as watch events; events the server could not serve are left out. An
/// event of an object's current version shares its bytes (held once).
fn history_events(
    changes: Vec<Change>,
    objects: &BTreeMap<String, Entry>,
    check: Check,
) -> Vec<Arc<Event>> {
    let mut prev: HashMap<String, Entry> = HashMap::new();
    let mut events = Vec::with_capacity(changes.len());
    for c in changes {
        let current = objects.get(&c.key).filter(|o| o.rev == c.rev);
        let entry = match current {
            Some(o) if c.kind != EventType::Deleted => o.clone(),
            _ if decodable(&c.key, &c.json, check).is_err() => continue,
            _ => Entry::from_json(c.rev, c.json),
        };
        let before = prev.insert(c.key.clone(), entry.clone());
        events.push(Arc::new(Event {
            kind: c.kind,
            key: c.key,
            entry,
            prev: before,
        }));
    }
    events
}

fn writer_loop<B: Backend>(
    mut backend: B,
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<(Write, Reply)>,
    history: Duration,
) {
    let mut last_prune = Instant::now();
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        commit_batch(&mut backend, &shared, batch);
        if last_prune.elapsed() > Duration::from_secs(30) {
            last_prune = Instant::now();
            if let Err(e) = backend.prune_history(history.as_secs()) {
                tracing::warn!(error = %e, "pruning persisted watch history failed");
            }
        }
    }
}

/// Checks each write against the committed state plus the earlier writes of the same batch.
fn commit_batch<B: Backend>(backend: &mut B, shared: &Shared, batch: Vec<(Write, Reply)>) {
    let base_rev = shared.state.read().unwrap_or_else(|p| p.into_inner()).rev;
    let mut rev = base_rev;
    let mut overlay: HashMap<String, Option<Entry>> = HashMap::new();
    let mut events: Vec<Arc<Event>> = Vec::new();
    let mut replies: Vec<(Reply, Result<Entry, StoreError>)> = Vec::new();
    {
        let st = shared.state.read().unwrap_or_else(|p| p.into_inner());
        for (w, reply) in batch {
            let current = match overlay.get(&w.key) {
                Some(e) => e.clone(),
                None => st.objects.get(&w.key).cloned(),
            };
            match apply(&w, current.as_ref(), rev + 1) {
                Ok(ev) => {
                    rev += 1;
                    let slim = ev.entry.slim();
                    let stored = match ev.kind {
                        EventType::Deleted => None,
                        _ => Some(slim.clone()),
                    };
                    overlay.insert(w.key.clone(), stored);
                    replies.push((reply, Ok(ev.entry)));
                    events.push(Arc::new(Event { entry: slim, ..ev }));
                }
                Err(e) => replies.push((reply, Err(e))),
            }
        }
    }
    if !events.is_empty() {
        let changes: Vec<Change> = events
            .iter()
            .map(|e| Change {
                rev: e.entry.rev,
                key: e.key.clone(),
                kind: e.kind,
                json: e.entry.json.clone(),
            })
            .collect();
        if let Err(e) = backend.commit(rev, &changes) {
            tracing::error!(error = %e, "commit failed; rejecting the batch");
            for (reply, res) in replies {
                let _ = reply.send(res.and(Err(e.clone())));
            }
            return;
        }
        shared.publish(overlay, rev, events);
    }
    for (reply, res) in replies {
        let _ = reply.send(res);
    }
}

fn apply(w: &Write, current: Option<&Entry>, rev: Rev) -> Result<Event, StoreError> {
    match (w.precondition, current) {
        (Precondition::MustNotExist, Some(_)) => return Err(StoreError::AlreadyExists),
        (Precondition::MustExist | Precondition::Rev(_), None) => return Err(StoreError::NotFound),
        (Precondition::Rev(want), Some(cur)) if cur.rev != want => {
            return Err(StoreError::Conflict { current: cur.rev })
        }
        _ => {}
    }
    let (kind, mut obj) = match (&w.value, current) {
        (Some(v), None) => (EventType::Added, v.clone()),
        (Some(v), Some(_)) => (EventType::Modified, v.clone()),
        (None, Some(cur)) => (EventType::Deleted, (*cur.obj).clone()),
        (None, None) => return Err(StoreError::NotFound),
    };
    set_resource_version(&mut obj, rev);
    Ok(Event {
        kind,
        key: w.key.clone(),
        entry: Entry::new(rev, obj),
        prev: current.map(Entry::slim),
    })
}
