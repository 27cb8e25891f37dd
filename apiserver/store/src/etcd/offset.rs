//! The revision offset: a store restored from a snapshot into a new etcd serves
//! resourceVersion = etcd revision + offset, so resourceVersions continue above every one the
//! old cluster issued (a new etcd starts again at revision 1; etcd 3.4 has no
//! `--bump-revision`). Written once by `snapshot restore` before any object, read once by each
//! server at start; absent (0) on an etcd that was never restored into.

use super::{describe, unavailable};
use crate::{Rev, StoreError};
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};

/// The key under the prefix (never served).
pub const OFFSET_KEY: &str = "/keelson_revision_offset";

/// The offset etcd holds under `prefix` (0 when none).
pub async fn read(client: &Client, prefix: &str, servers: &str) -> Result<Rev, StoreError> {
    let key = format!("{prefix}{OFFSET_KEY}");
    let resp = client
        .kv_client()
        .get(key.clone(), None)
        .await
        .map_err(|e| unavailable(servers, describe(&e)))?;
    match resp.kvs().first() {
        None => Ok(0),
        Some(kv) => String::from_utf8_lossy(kv.value())
            .trim()
            .parse()
            .map_err(|_| StoreError::Backend(format!("etcd key {key} does not hold a number"))),
    }
}

/// How many keys etcd holds under `prefix` (the offset key included).
pub async fn keys(client: &Client, prefix: &str, servers: &str) -> Result<i64, StoreError> {
    let dir = format!("{prefix}/");
    let opts = GetOptions::new()
        .with_range(super::prefix_end(&dir))
        .with_count_only();
    let resp = client
        .kv_client()
        .get(dir, Some(opts))
        .await
        .map_err(|e| unavailable(servers, describe(&e)))?;
    Ok(resp.count())
}

/// Writes the offset unless the key exists; returns the offset etcd then holds.
pub async fn set(
    client: &Client,
    prefix: &str,
    servers: &str,
    offset: Rev,
) -> Result<Rev, StoreError> {
    let key = format!("{prefix}{OFFSET_KEY}");
    let txn = Txn::new()
        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, offset.to_string(), None)]);
    client
        .kv_client()
        .txn(txn)
        .await
        .map_err(|e| unavailable(servers, describe(&e)))?;
    read(client, prefix, servers).await
}
