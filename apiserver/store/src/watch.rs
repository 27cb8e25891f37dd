//! Watch history: the recent committed events in memory, fanned out to watchers through a
//! broadcast channel. A watcher that falls behind catches up from the history; one that asks for
//! a revision older than the history gets "too old" (410 Gone, sent in-stream by the caller).

use super::{Event, Rev};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

pub struct WatchCache {
    hist: Mutex<History>,
    tx: broadcast::Sender<Arc<Event>>,
    /// Bumped when the history starts over (etcd compacted what this server had not seen):
    /// every watcher then ends with "too old" and relists.
    epoch: watch::Sender<u64>,
    max_events: usize,
    max_age: Duration,
}

pub(super) struct History {
    events: VecDeque<(Instant, Arc<Event>)>,
    /// The history holds every event with a revision above this one.
    oldest: Rev,
}

/// The revision asked for is older than the history kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld;

impl WatchCache {
    pub fn new(oldest: Rev, max_events: usize, max_age: Duration) -> WatchCache {
        let (tx, _) = broadcast::channel(8192);
        WatchCache {
            hist: Mutex::new(History {
                events: VecDeque::new(),
                oldest,
            }),
            tx,
            epoch: watch::Sender::new(0),
            max_events: max_events.max(1),
            max_age,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, History> {
        self.hist.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends committed events (in revision order) and wakes watchers. Called with the lock held
    /// so that a watcher's snapshot and its stream never miss or repeat an event.
    pub(super) fn publish(&self, hist: &mut History, events: Vec<Arc<Event>>) {
        let now = Instant::now();
        for e in events {
            hist.events.push_back((now, e.clone()));
            let _ = self.tx.send(e);
        }
        while let Some((at, e)) = hist.events.front() {
            let old = now.duration_since(*at) > self.max_age;
            if !(old || hist.events.len() > self.max_events) {
                break;
            }
            hist.oldest = e.entry.rev;
            hist.events.pop_front();
        }
    }

    /// Loads history that was persisted before a restart.
    pub(super) fn preload(&self, hist: &mut History, mut events: Vec<Arc<Event>>) {
        if events.len() > self.max_events {
            events.drain(..events.len() - self.max_events);
        }
        if let Some(first) = events.first() {
            hist.oldest = first.entry.rev.saturating_sub(1);
        }
        let now = Instant::now();
        hist.events.extend(events.into_iter().map(|e| (now, e)));
    }

    /// Drops the history up to `rev` (etcd compacted it): resuming there is "too old", as with
    /// kube-apiserver.
    pub(super) fn compacted(&self, rev: Rev) {
        let mut hist = self.lock();
        while hist.events.front().is_some_and(|(_, e)| e.entry.rev <= rev) {
            hist.events.pop_front();
        }
        hist.oldest = hist.oldest.max(rev);
    }

    /// Starts the history over at `rev` and ends every current watch.
    pub(super) fn reset(&self, hist: &mut History, rev: Rev) {
        hist.events.clear();
        hist.oldest = rev;
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Events after `rev`, and a receiver for everything later. Called with the lock held.
    pub(super) fn subscribe(
        self: &Arc<Self>,
        hist: &History,
        rev: Rev,
        prefix: &str,
    ) -> Result<Subscription, TooOld> {
        let backlog = since(hist, rev)?;
        Ok(Subscription {
            prefix: prefix.to_string(),
            cache: self.clone(),
            backlog: backlog.into(),
            rx: self.tx.subscribe(),
            epoch: self.epoch.subscribe(),
            last: rev,
        })
    }

    pub fn oldest(&self) -> Rev {
        self.lock().oldest
    }
}

fn since(hist: &History, rev: Rev) -> Result<Vec<Arc<Event>>, TooOld> {
    if rev < hist.oldest {
        return Err(TooOld);
    }
    let start = hist.events.partition_point(|(_, e)| e.entry.rev <= rev);
    Ok(hist.events.range(start..).map(|(_, e)| e.clone()).collect())
}

/// A stream of the committed events under a key prefix after a revision, each delivered once
/// and in order.
pub struct Subscription {
    prefix: String,
    cache: Arc<WatchCache>,
    backlog: VecDeque<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
    epoch: watch::Receiver<u64>,
    last: Rev,
}

impl Subscription {
    /// The next event; Err(TooOld) when this watcher fell behind further than the history goes,
    /// None when the server is shutting down.
    pub async fn next(&mut self) -> Option<Result<Arc<Event>, TooOld>> {
        loop {
            if self.epoch.has_changed().unwrap_or(false) {
                return Some(Err(TooOld));
            }
            if let Some(e) = self.backlog.pop_front() {
                if e.entry.rev > self.last {
                    self.last = e.entry.rev;
                    if e.key.starts_with(&self.prefix) {
                        return Some(Ok(e));
                    }
                }
                continue;
            }
            let next = tokio::select! {
                e = self.rx.recv() => e,
                _ = self.epoch.changed() => return Some(Err(TooOld)),
            };
            match next {
                Ok(e) if e.entry.rev > self.last => {
                    self.last = e.entry.rev;
                    if e.key.starts_with(&self.prefix) {
                        return Some(Ok(e));
                    }
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let hist = self.cache.lock();
                    match since(&hist, self.last) {
                        Ok(b) => self.backlog = b.into(),
                        Err(t) => return Some(Err(t)),
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    pub fn last_rev(&self) -> Rev {
        self.last
    }
}
