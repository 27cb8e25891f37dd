//! The etcd backend: writes are etcd transactions with the write's precondition as their
//! compare; the objects in memory and the watch history are fed by one etcd watch on the prefix
//! (`feed.rs`), so every API server on the same etcd sees every write. resourceVersion is the
//! etcd revision that last modified the object (its mod_revision), as upstream, plus the
//! revision offset a snapshot restore left (`offset.rs`; 0 otherwise).

use self::endpoints::Endpoints;
use super::memory::{checked, Shared};
use super::{set_resource_version, Check, Rev, Row, StoreError};
use bytes::Bytes;
use etcd_client::{Certificate, Client, ConnectOptions, GetOptions, Identity, TlsOptions};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

mod compact;
pub(super) mod endpoints;
mod feed;
pub mod offset;

/// How long one etcd request may take before the API request fails (upstream's default
/// --etcd-request-timeout is 5s... for dial; requests use the caller's deadline).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Most objects fetched per range request at load.
const PAGE: i64 = 500;

/// The largest reply accepted from etcd (the client's default is 4 MiB): a page of large
/// objects, or a watch catching up with up to 1000 revisions at once, can be more.
pub(super) const MAX_REPLY: usize = 512 << 20;

/// The etcd flags.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub servers: Vec<String>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Every key is stored under it, e.g. /registry/core/pods/default/web.
    pub prefix: String,
    /// How often to compact history older than one interval (zero: never).
    pub compaction_interval: Duration,
}

/// This server's connection to etcd, shared by every request.
pub struct Remote {
    pub(super) endpoints: endpoints::Endpoints,
    pub(super) prefix: String,
    servers: String,
    /// Added to every etcd revision to make a resourceVersion (see `offset.rs`).
    pub(super) offset: Rev,
    pub(super) shared: Arc<Shared>,
    /// The revision memory has applied, advanced by the feed.
    pub(super) applied: watch::Receiver<Rev>,
    /// What this server's writes stored, by revision, until the feed applies them: the feed
    /// takes their bytes instead of parsing etcd's again (`write.rs`).
    pub(super) pending: std::sync::Mutex<std::collections::HashMap<Rev, (String, Bytes)>>,
    /// Asks the feed for a progress notification (for consistent reads after writes that are
    /// not under the prefix, which the watch does not report).
    pub(super) progress: mpsc::Sender<()>,
}

/// etcd did not answer, or answered with an error: the API server is not at fault and the
/// request can be retried (503).
pub(super) fn unavailable(servers: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("etcd ({servers}): {e}"))
}

/// An etcd client error as one line: etcd's message (e.g. "etcdserver: no leader") or the
/// transport's, with its root cause (e.g. "Connection refused").
pub(super) fn describe(e: &etcd_client::Error) -> String {
    let (mut msg, mut cause) = match e {
        etcd_client::Error::GRpcStatus(s) => {
            (s.message().to_string(), std::error::Error::source(s))
        }
        other => (other.to_string(), std::error::Error::source(other)),
    };
    let mut root = None;
    while let Some(c) = cause {
        root = Some(c);
        cause = c.source();
    }
    if let Some(root) = root.map(|r| r.to_string()) {
        if !msg.contains(&root) {
            msg = format!("{msg}: {root}");
        }
    }
    msg
}

impl EtcdConfig {
    /// A client of one of the servers (for admin commands).
    pub async fn client(&self) -> Result<Client, StoreError> {
        Ok(self.connect().await?.current())
    }

    async fn connect(&self) -> Result<Endpoints, StoreError> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(10), REQUEST_TIMEOUT)
            // Without quorum a member answers at once instead of waiting for a leader.
            .with_require_leader(true);
        if let Some(tls) = self.tls()? {
            opts = opts.with_tls(tls);
        }
        Endpoints::connect(&self.servers, opts).await
    }

    fn tls(&self) -> Result<Option<TlsOptions>, StoreError> {
        let read = |flag: &str, p: &PathBuf| {
            std::fs::read(p)
                .map_err(|e| StoreError::Backend(format!("{flag} {}: {e}", p.display())))
        };
        let mut tls = TlsOptions::new();
        let mut any = false;
        if let Some(ca) = &self.ca_file {
            tls = tls.ca_certificate(Certificate::from_pem(read("--etcd-cafile", ca)?));
            any = true;
        }
        match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => {
                let cert = read("--etcd-certfile", c)?;
                let key = read("--etcd-keyfile", k)?;
                tls = tls.identity(Identity::from_pem(cert, key));
                any = true;
            }
            (None, None) => {}
            _ => {
                return Err(StoreError::Backend(
                    "--etcd-certfile and --etcd-keyfile go together".into(),
                ))
            }
        }
        let https = self.servers.iter().any(|s| s.starts_with("https://"));
        Ok((any || https).then_some(tls))
    }
}

/// Connects, loads every object under the prefix into memory and starts the watch that keeps
/// it current (and the compaction loop).
pub(super) async fn connect(
    cfg: &EtcdConfig,
    history: Duration,
    max_events: usize,
    check: Check,
) -> Result<(Arc<Shared>, Arc<Remote>), StoreError> {
    let servers = cfg.servers.join(",");
    let prefix = cfg.prefix.trim_end_matches('/').to_string();
    let (endpoints, rows, rev, offset) = first_load(cfg, &prefix).await?;
    let (objects, refused) = checked(rows, check);
    for (row, reason) in &refused {
        // Left in etcd (another server, perhaps newer, may serve it); not served here.
        tracing::error!(key = %row.key, %reason, "stored object in etcd cannot be decoded; not served");
    }
    let shared = Shared::new(objects, rev, Vec::new(), max_events, history);
    let (applied_tx, applied) = watch::channel(rev);
    let (progress, progress_rx) = mpsc::channel(1);
    let remote = Arc::new(Remote {
        endpoints,
        prefix,
        servers,
        offset,
        shared: shared.clone(),
        applied,
        pending: Default::default(),
        progress,
    });
    tokio::spawn(feed::run(
        remote.clone(),
        rev,
        applied_tx,
        progress_rx,
        check,
    ));
    if !cfg.compaction_interval.is_zero() {
        tokio::spawn(compact::run(remote.clone(), cfg.compaction_interval));
    }
    Ok((shared, remote))
}

/// Connects and loads, waiting (a minute at most) for an etcd that is not up yet, as when the
/// machines of a cluster start together. Also returns the revision offset.
async fn first_load(
    cfg: &EtcdConfig,
    prefix: &str,
) -> Result<(Endpoints, Vec<Row>, Rev, Rev), StoreError> {
    let servers = cfg.servers.join(",");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let endpoints = cfg.connect().await?;
    loop {
        let client = endpoints.current();
        let loaded = async {
            let off = offset::read(&client, prefix, &servers).await?;
            let (rows, rev) = load(&client, prefix, &servers, off).await?;
            Ok((rows, rev, off))
        };
        match loaded.await {
            Ok((rows, rev, off)) => return Ok((endpoints, rows, rev, off)),
            Err(StoreError::Unavailable(why)) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %why, "waiting for etcd");
                endpoints.next();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Every object under the prefix at one revision, page by page; resourceVersions set (etcd's
/// revisions plus `offset`).
pub(super) async fn load(
    client: &Client,
    prefix: &str,
    servers: &str,
    offset: Rev,
) -> Result<(Vec<Row>, Rev), StoreError> {
    let mut kv = client.kv_client().max_decoding_message_size(MAX_REPLY);
    let dir = format!("{prefix}/");
    let end = prefix_end(&dir);
    let mut from = dir.clone().into_bytes();
    let mut rev = 0;
    let mut rows = Vec::new();
    loop {
        let mut opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if rev > 0 {
            opts = opts.with_revision(rev);
        }
        let resp = kv
            .get(from.clone(), Some(opts))
            .await
            .map_err(|e| unavailable(servers, describe(&e)))?;
        if rev == 0 {
            rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        }
        for kv in resp.kvs() {
            let Some(key) = kv.key().strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            if internal(key) {
                continue;
            }
            let rv = resource_version(kv.mod_revision(), offset);
            rows.push(Row {
                key: String::from_utf8_lossy(key).into_owned(),
                rev: rv,
                json: with_resource_version(kv.value(), rv)
                    .unwrap_or_else(|| Bytes::copy_from_slice(kv.value())),
            });
        }
        match (resp.more(), resp.kvs().last()) {
            (true, Some(last)) => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((rows, resource_version(rev, offset)))
}

/// The resourceVersion of an etcd revision, given the store's revision offset.
fn resource_version(etcd: i64, offset: Rev) -> Rev {
    etcd.max(0) as Rev + offset
}

/// The keys under the prefix that are this backend's own, never served as objects.
pub(super) fn internal(key: &[u8]) -> bool {
    key == compact::COMPACT_KEY.as_bytes() || key == offset::OFFSET_KEY.as_bytes()
}

/// The first key after every key that starts with `p`.
pub(super) fn prefix_end(p: &str) -> Vec<u8> {
    let mut end = p.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Stored bytes with metadata.resourceVersion set to the etcd revision (etcd holds objects
/// without it: the revision is known only once the transaction commits). None if not JSON.
pub(super) fn with_resource_version(json: &[u8], rev: Rev) -> Option<Bytes> {
    let mut obj: Value = serde_json::from_slice(json).ok()?;
    set_resource_version(&mut obj, rev);
    Some(super::encode(&obj))
}

impl Remote {
    /// The resourceVersion of an etcd revision.
    pub(super) fn rev(&self, etcd: i64) -> Rev {
        resource_version(etcd, self.offset)
    }

    /// The etcd revision of a resourceVersion; negative (matching no revision) for one below
    /// the offset, as a client may send from before a restore.
    pub(super) fn etcd_rev(&self, rev: Rev) -> i64 {
        rev as i64 - self.offset as i64
    }

    pub(super) fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub(super) fn unavailable(&self, e: impl std::fmt::Display) -> StoreError {
        unavailable(&self.servers, e)
    }

    /// Waits until the feed has applied `rev` to memory (read-your-writes on this server).
    pub(super) async fn wait_applied(&self, rev: Rev) -> Result<(), StoreError> {
        let mut applied = self.applied.clone();
        let waited = tokio::time::timeout(REQUEST_TIMEOUT, applied.wait_for(|r| *r >= rev)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => Err(self.unavailable(format!(
                "the watch has not delivered revision {rev} within {}s",
                REQUEST_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Waits (3 s at most) until memory has `rev`; past that the caller answers from what it has.
    pub async fn wait_for(&self, rev: Rev) -> Result<(), StoreError> {
        let mut applied = self.applied.clone();
        let wait = applied.wait_for(|r| *r >= rev);
        let _ = tokio::time::timeout(Duration::from_secs(3), wait).await;
        Ok(())
    }

    /// etcd's current revision (a quorum read), then waits until memory has it.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let rev = self.current_rev().await?;
        if *self.applied.borrow() >= rev {
            return Ok(());
        }
        let mut applied = self.applied.clone();
        let quick =
            tokio::time::timeout(Duration::from_millis(100), applied.wait_for(|r| *r >= rev));
        if let Ok(Ok(_)) = quick.await {
            return Ok(());
        }
        // The last writes may be outside the prefix (not this cluster's): the watch says
        // nothing of them until asked for its progress.
        let _ = self.progress.try_send(());
        self.wait_applied(rev).await
    }

    /// etcd's current revision, read through the leader.
    pub(super) async fn current_rev(&self) -> Result<Rev, StoreError> {
        // One key that holds nothing: the cheapest linearizable read there is.
        let key = self.prefix.clone();
        let get = |c: Client| {
            let key = key.clone();
            async move { c.kv_client().get(key, None).await }
        };
        let resp = self.endpoints.call(true, get).await?;
        Ok(self.rev(resp.header().map(|h| h.revision()).unwrap_or(0)))
    }

    /// The /readyz check: a quorum read answers.
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.current_rev().await.map(|_| ())
    }
}
