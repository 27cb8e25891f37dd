//! The etcd watch that feeds memory: every change under the prefix, whoever wrote it, applied in
//! revision order. When the watch breaks it resumes after the last revision applied; when etcd
//! has compacted past that revision, it lists everything again and watchers start over (410).

use super::{load, with_resource_version, Remote, MAX_REPLY};
use crate::memory::checked;
use crate::{Check, Entry, Event, EventType, Rev};
use etcd_client::{EventType as EtcdEventType, WatchOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Why one watch stream ended.
enum Ended {
    /// etcd has compacted the revisions this server has not seen yet.
    Compacted(Rev),
    /// The stream closed or failed (a member went away, quorum lost): resume.
    Broken(String),
}

/// Runs for the server's lifetime.
pub(crate) async fn run(
    remote: Arc<Remote>,
    mut rev: Rev,
    applied: watch::Sender<Rev>,
    mut progress: mpsc::Receiver<()>,
    check: Check,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let started = rev;
        match follow(&remote, &mut rev, &applied, &mut progress).await {
            Ended::Compacted(compacted) => {
                tracing::warn!(
                    from = rev + 1,
                    compacted,
                    "etcd compacted revisions this server had not seen; listing again"
                );
                match relist(&remote, check).await {
                    Ok(now) => {
                        rev = now;
                        applied.send_replace(now);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "listing etcd again failed; retrying");
                        remote.endpoints.next();
                    }
                }
            }
            Ended::Broken(why) => {
                tracing::warn!(error = %why, resume_after = rev, "etcd watch interrupted; resuming");
                // Perhaps on another member: this one may be down.
                remote.endpoints.next();
            }
        }
        backoff = match rev > started {
            true => Duration::from_millis(100),
            false => (backoff * 2).min(Duration::from_secs(2)),
        };
        tokio::time::sleep(backoff).await;
    }
}

/// Follows one watch stream from `rev + 1` until it ends, applying what it delivers.
async fn follow(
    remote: &Remote,
    rev: &mut Rev,
    applied: &watch::Sender<Rev>,
    progress: &mut mpsc::Receiver<()>,
) -> Ended {
    // No previous values (prev_kv): memory holds every object, so a deletion's last state is
    // known here; asking etcd for it cost it a read per event (about a tenth of its CPU per
    // write under 64 writers, scripts/bench apiserver --backend etcd).
    let opts = WatchOptions::new()
        .with_prefix()
        .with_progress_notify()
        .with_start_revision(remote.etcd_rev(*rev) + 1);
    let dir = format!("{}/", remote.prefix);
    let opened = tokio::time::Instant::now();
    let mut client = remote
        .endpoints
        .current()
        .watch_client()
        .max_decoding_message_size(MAX_REPLY);
    let mut stream = match client.watch(dir, Some(opts)).await {
        Ok(s) => s,
        Err(e) => return Ended::Broken(super::describe(&e)),
    };
    loop {
        let msg = tokio::select! {
            m = stream.message() => m,
            Some(()) = progress.recv() => {
                // etcd 3.4 may answer for a watch still catching up with a revision ahead of
                // events not yet sent; a watch a second old has caught up.
                tokio::time::sleep_until(opened + Duration::from_secs(1)).await;
                if let Err(e) = stream.request_progress().await {
                    return Ended::Broken(e.to_string());
                }
                continue;
            }
        };
        let resp = match msg {
            Ok(Some(r)) => r,
            Ok(None) => return Ended::Broken("the watch stream closed".into()),
            Err(e) => return Ended::Broken(super::describe(&e)),
        };
        if resp.canceled() {
            return match resp.compact_revision() {
                c if c > 0 => Ended::Compacted(remote.rev(c)),
                _ => Ended::Broken(format!("watch canceled: {}", resp.cancel_reason())),
            };
        }
        if !resp.events().is_empty() {
            *rev = apply(remote, resp.events()).max(*rev);
        } else if !resp.created() {
            // A progress notification: every change up to its revision has been delivered.
            let at = remote.rev(resp.header().map(|h| h.revision()).unwrap_or(0));
            if at > *rev {
                *rev = at;
                remote.shared.publish(HashMap::new(), at, Vec::new());
            }
        }
        applied.send_replace(*rev);
    }
}

/// Applies one watch response's events; returns the last revision.
fn apply(remote: &Remote, events: &[etcd_client::Event]) -> Rev {
    let mut changed: HashMap<String, Option<Entry>> = HashMap::new();
    let mut out = Vec::with_capacity(events.len());
    let mut last = 0;
    {
        let st = remote.shared.read();
        for ev in events {
            let Some(kv) = ev.kv() else { continue };
            let rev = remote.rev(kv.mod_revision());
            last = last.max(rev);
            let Some(key) = kv.key().strip_prefix(remote.prefix.as_bytes()) else {
                continue;
            };
            if super::internal(key) {
                continue;
            }
            let key = String::from_utf8_lossy(key).into_owned();
            let before = match changed.get(&key) {
                Some(e) => e.clone(),
                None => st.objects.get(&key).cloned(),
            };
            let kind = match (ev.event_type(), &before) {
                (EtcdEventType::Delete, _) => EventType::Deleted,
                (EtcdEventType::Put, Some(_)) => EventType::Modified,
                (EtcdEventType::Put, None) => EventType::Added,
            };
            let Some(json) = stored_json(remote, &key, rev, ev, before.as_ref()) else {
                continue;
            };
            let entry = Entry::from_json(rev, json);
            let stored = (kind != EventType::Deleted).then(|| entry.clone());
            changed.insert(key.clone(), stored);
            out.push(Arc::new(Event {
                kind,
                key,
                entry,
                prev: before,
            }));
        }
    }
    remote.shared.publish(changed, last, out);
    last
}

/// The bytes to serve for one event, resourceVersion set: this server's own write as it stored
/// it; else etcd's value (for a deletion, the last state memory knows) with the revision put
/// in. A deletion of what memory never held (it could not be decoded) is nothing to report.
fn stored_json(
    remote: &Remote,
    key: &str,
    rev: Rev,
    ev: &etcd_client::Event,
    before: Option<&Entry>,
) -> Option<bytes::Bytes> {
    if let Some((k, own)) = remote.take_pending(rev) {
        if k == key {
            return Some(own);
        }
    }
    let raw = match (ev.event_type(), before) {
        (EtcdEventType::Put, _) => ev.kv().map(|kv| kv.value())?,
        (EtcdEventType::Delete, Some(b)) => &b.json[..],
        (EtcdEventType::Delete, None) => return None,
    };
    let json = with_resource_version(raw, rev);
    if json.is_none() {
        tracing::error!(%key, rev, "etcd holds a value that is not JSON; not served");
    }
    json
}

/// Lists everything again after a compaction: memory becomes etcd's current state and the watch
/// history starts over, so every watcher gets 410 Gone and relists (as upstream's cacher).
async fn relist(remote: &Remote, check: Check) -> Result<Rev, crate::StoreError> {
    let client = remote.endpoints.current();
    let (rows, rev) = load(&client, &remote.prefix, "etcd", remote.offset).await?;
    let (objects, refused) = checked(rows, check);
    for (row, reason) in &refused {
        tracing::error!(key = %row.key, %reason, "stored object in etcd cannot be decoded; not served");
    }
    remote.shared.replace(objects, rev);
    Ok(rev)
}
