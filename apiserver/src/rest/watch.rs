//! WATCH: a stream of one JSON event a line. Starts from the current state (resourceVersion
//! unset or "0", or sendInitialEvents) or exactly after the version asked for; a version older
//! than the history gets an in-stream ERROR with a 410 Status, as clients expect.

use super::read::{is_true, prefix, too_large, Filter, ListParams};
use super::{Api, Target};
use crate::negotiate::Output;
use crate::render;
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{Entry, EventType, Subscription, WatchStart};
use bytes::Bytes;
use rand::Rng;
use serde_json::json;
use std::time::Duration;
use tokio::sync::mpsc;

const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

struct Stream {
    res: &'static Resource,
    out: Output,
    filter: Filter,
    tx: mpsc::Sender<Bytes>,
}

impl Stream {
    async fn send(&self, kind: &str, e: &Entry) -> bool {
        let obj = render::object(self.res, e, self.out, true);
        self.tx.send(render::event(kind, &obj)).await.is_ok()
    }

    async fn bookmark(&self, rev: u64, initial_end: bool) -> bool {
        let mut meta = json!({ "resourceVersion": rev.to_string() });
        if initial_end {
            let end = json!({ "k8s.io/initial-events-end": "true" });
            crate::object::set_path(&mut meta, &["annotations"], end);
        }
        let obj = json!({ "kind": self.res.kind, "apiVersion": self.res.api_version(), "metadata": meta });
        let bytes = serde_json::to_vec(&obj).unwrap_or_default();
        self.tx
            .send(render::event("BOOKMARK", &bytes))
            .await
            .is_ok()
    }

    /// Ends the stream with an ERROR event, as upstream reports errors once a watch started.
    async fn fail(&self, e: ApiError) {
        let status = serde_json::to_vec(&e.to_status()).unwrap_or_default();
        let _ = self.tx.send(render::event("ERROR", &status)).await;
    }
}

pub fn watch(
    api: &Api,
    t: &Target,
    p: &ListParams,
    out: Output,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let filter = Filter::new(p)?;
    let initial = is_true(&p.send_initial_events);
    let from = match p.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(_) if initial => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}")))?,
        ),
    };
    let bookmarks = is_true(&p.allow_watch_bookmarks);
    let timeout = match p.timeout_seconds {
        Some(s) if s > 0 => Duration::from_secs(s),
        // Spread reconnects of many clients, as upstream does (30-60 minutes).
        _ => Duration::from_secs(rand::rng().random_range(1800..3600)),
    };
    let (tx, rx) = mpsc::channel(256);
    let stream = Stream {
        res: t.res,
        out,
        filter,
        tx,
    };
    let current = api.store.current_rev();
    if let Some(asked) = from.filter(|r| *r > current) {
        // Events up to `asked` would be skipped unseen: refuse, as upstream does.
        tokio::spawn(async move { stream.fail(too_large(asked, current)).await });
        return Ok(rx);
    }
    match api.store.watch(&prefix(t), from) {
        Err(_) => {
            let msg = format!(
                "too old resource version: {} ({})",
                from.unwrap_or(0),
                api.store.oldest_rev() + 1
            );
            tokio::spawn(async move { stream.fail(ApiError::gone(msg)).await });
        }
        Ok((start, sub)) => {
            tokio::spawn(run(stream, start, sub, initial, bookmarks, timeout));
        }
    }
    Ok(rx)
}

async fn run(
    s: Stream,
    start: WatchStart,
    mut sub: Subscription,
    initial: bool,
    bookmarks: bool,
    timeout: Duration,
) {
    if let WatchStart::Snapshot(items, rev) = start {
        for e in items.iter().filter(|e| s.filter.matches_entry(e)) {
            if !s.send("ADDED", e).await {
                return;
            }
        }
        if initial && !s.bookmark(rev, true).await {
            return;
        }
    }
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(BOOKMARK_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = s.tx.closed() => return,
            _ = tick.tick(), if bookmarks => {
                if !s.bookmark(sub.last_rev(), false).await { return; }
            }
            ev = sub.next() => {
                let ev = match ev {
                    None => return,
                    Some(Err(_)) => {
                        let msg = format!("too old resource version: {}", sub.last_rev());
                        s.fail(ApiError::gone(msg)).await;
                        return;
                    }
                    Some(Ok(ev)) => ev,
                };
                let now = s.filter.matches_entry(&ev.entry);
                // A change that moves an object into or out of a filtered view is an
                // ADDED or DELETED for that view; an unknown previous state counts as matching.
                let before = ev.prev.as_ref().is_none_or(|p| s.filter.matches_entry(p));
                let kind = match ev.kind {
                    EventType::Added if now => "ADDED",
                    EventType::Deleted if now => "DELETED",
                    EventType::Modified if now && before => "MODIFIED",
                    EventType::Modified if now => "ADDED",
                    EventType::Modified if before => "DELETED",
                    _ => continue,
                };
                if !s.send(kind, &ev.entry).await { return; }
            }
        }
    }
}
