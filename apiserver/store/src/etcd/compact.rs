//! Compaction of etcd's history, as kube-apiserver does it: every interval, compact to the
//! revision seen one interval earlier. Several API servers share the work through one key
//! (upstream's `compact_rev_key`): the one whose compare-and-swap on its version wins compacts,
//! the others learn from it how far history goes.
//!
//! Unlike upstream the key is under the prefix (`<prefix>/compact_rev_key`, never served): the
//! watch feed then sees every revision this cluster writes, so a consistent read never has to
//! ask etcd for the watch's progress (whose notifications etcd 3.4 may send ahead of events).

use super::Remote;
use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use std::sync::Arc;
use std::time::Duration;

/// The key under the prefix, named as upstream's.
pub const COMPACT_KEY: &str = "/compact_rev_key";

/// Runs for the server's lifetime.
pub(crate) async fn run(remote: Arc<Remote>, interval: Duration) {
    let mut version = 0;
    let mut rev = 0;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match compact(&remote, version, rev).await {
            Ok((v, r)) => (version, rev) = (v, r),
            Err(e) => tracing::warn!(error = %e, "etcd compaction failed; trying next interval"),
        }
    }
}

/// One round: `version` is the compaction key's version last seen, `rev` the revision seen one
/// interval ago. Returns the new pair.
async fn compact(remote: &Remote, version: i64, rev: i64) -> Result<(i64, i64), crate::StoreError> {
    let key = remote.key(COMPACT_KEY);
    let txn = Txn::new()
        .when([Compare::version(key.clone(), CompareOp::Equal, version)])
        .and_then([TxnOp::put(key.clone(), rev.to_string(), None)])
        .or_else([TxnOp::get(key, None)]);
    let send = |c: etcd_client::Client| {
        let txn = txn.clone();
        async move { c.kv_client().txn(txn).await }
    };
    let resp = remote.endpoints.call(false, send).await?;
    let now = resp.header().map(|h| h.revision()).unwrap_or(0);
    if !resp.succeeded() {
        // Another server is compacting: follow its lead.
        let seen = match resp.op_responses().first() {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().cloned(),
            _ => None,
        };
        let Some(seen) = seen else {
            return Ok((0, now));
        };
        let done: i64 = String::from_utf8_lossy(seen.value()).parse().unwrap_or(0);
        remote.shared.cache.compacted(remote.rev(done));
        return Ok((seen.version(), now));
    }
    if rev > 0 {
        match remote
            .endpoints
            .current()
            .kv_client()
            .compact(rev, None)
            .await
        {
            Ok(_) => tracing::debug!(rev, "etcd history compacted"),
            // Already compacted further (by hand, or by another server's earlier round).
            Err(e) if e.to_string().contains("compacted") => {}
            Err(e) => return Err(remote.unavailable(super::describe(&e))),
        }
        remote.shared.cache.compacted(remote.rev(rev));
    }
    Ok((version + 1, now))
}
