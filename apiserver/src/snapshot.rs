//! `keelson-apiserver snapshot save|restore`, and the scheduled snapshots a running server
//! takes of its own store (`--snapshot-interval`, `--snapshot-retention`, as k3s's).
//!
//! One snapshot format for both stores (`store::snapshot`): on SQLite a copy by the online
//! backup; on etcd every object under the prefix at one revision (a consistent range read, not
//! etcd's maintenance snapshot, which holds every cluster sharing the etcd and which etcd 3.4
//! restores only into a new member's data directory without a revision bump). A snapshot of
//! either restores into either.

use crate::options::SnapshotAction;
use crate::store::etcd::offset;
use crate::store::snapshot::{self, Summary};
use crate::store::{EtcdConfig, Store, StoreError};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("etcd ({servers}) already holds {keys} key(s) under {prefix}; restore into a new, empty etcd (or another --etcd-prefix)")]
    NotEmpty {
        servers: String,
        keys: i64,
        prefix: String,
    },
    #[error("etcd ({servers}) holds a restore of another snapshot under {prefix} (revision offset {there}, this one's {want})")]
    OtherRestore {
        servers: String,
        prefix: String,
        there: u64,
        want: u64,
    },
    #[error("{0}")]
    Copy(#[from] crate::migrate::MigrateError),
}

/// Runs one `snapshot` command; returns what to print.
pub async fn command(data_dir: &Path, action: &SnapshotAction) -> Result<String, RestoreError> {
    match action {
        SnapshotAction::Save { file, store } => {
            let s = match store.etcd() {
                None => snapshot::save(data_dir, file)?,
                Some(cfg) => {
                    let source = open_etcd(&cfg).await?;
                    save_store(&source, data_dir, file).await?
                }
            };
            Ok(format!("saved {s} to {}\n", file.display()))
        }
        SnapshotAction::Restore {
            file,
            bump_revision,
            store,
        } => {
            let (s, serve) = match store.etcd() {
                None => {
                    let s = snapshot::restore(file, data_dir, *bump_revision)?;
                    (s, format!("--data-dir {}", data_dir.display()))
                }
                Some(cfg) => {
                    let s = restore_etcd(file, data_dir, *bump_revision, &cfg).await?;
                    let serve = format!(
                        "--data-dir {} --etcd-servers {}",
                        data_dir.display(),
                        cfg.servers.join(",")
                    );
                    (s, serve)
                }
            };
            Ok(format!(
                "restored {s}\nstart keelson-apiserver with {serve} to serve them; clients \
                 watching from an older resourceVersion get 410 Gone and list again\n"
            ))
        }
    }
}

async fn open_etcd(cfg: &EtcdConfig) -> Result<Store, StoreError> {
    Store::open_etcd(cfg, Duration::from_secs(60), 1000, crate::migrate::any_key).await
}

/// A snapshot of what `store` holds now (for etcd: every write committed before this call).
async fn save_store(store: &Store, data_dir: &Path, out: &Path) -> Result<Summary, RestoreError> {
    store.sync().await?;
    let (items, rev) = store.list_keyed("");
    let objects: Vec<_> = items
        .into_iter()
        .map(|(key, e)| (key, e.rev, e.json))
        .collect();
    let (data_dir, out) = (data_dir.to_path_buf(), out.to_path_buf());
    let saved =
        tokio::task::spawn_blocking(move || snapshot::save_objects(&data_dir, &out, rev, &objects))
            .await
            .map_err(|e| StoreError::Backend(e.to_string()))??;
    Ok(saved)
}

/// Into a new, empty etcd: the offset first (resourceVersions above the snapshot's plus
/// `bump`), then every object. Run again after a failure, it goes on where it stopped.
async fn restore_etcd(
    file: &Path,
    data_dir: &Path,
    bump: u64,
    cfg: &EtcdConfig,
) -> Result<Summary, RestoreError> {
    let contents = snapshot::read(file)?;
    let want = contents.rev.saturating_add(bump);
    let servers = cfg.servers.join(",");
    let prefix = cfg.prefix.trim_end_matches('/').to_string();
    let client = cfg.client().await?;
    let there = offset::read(&client, &prefix, &servers).await?;
    let keys = offset::keys(&client, &prefix, &servers).await?;
    match there {
        0 if keys > 0 => {
            return Err(RestoreError::NotEmpty {
                servers,
                keys,
                prefix: cfg.prefix.clone(),
            })
        }
        0 => {}
        t if t == want => {} // an earlier run of this restore
        t => {
            return Err(RestoreError::OtherRestore {
                servers,
                prefix: cfg.prefix.clone(),
                there: t,
                want,
            })
        }
    }
    let files = contents.write_files(file, data_dir)?;
    let set = offset::set(&client, &prefix, &servers, want).await?;
    if set != want {
        return Err(RestoreError::OtherRestore {
            servers,
            prefix: cfg.prefix.clone(),
            there: set,
            want,
        });
    }
    let target = open_etcd(cfg).await?;
    let present: HashMap<_, _> = target.list_keyed("").0.into_iter().collect();
    let mut objects = Vec::with_capacity(contents.objects.len());
    for (key, json) in contents.objects {
        match serde_json::from_slice(&json) {
            Ok(v) => objects.push((key, v)),
            Err(e) => tracing::warn!(%key, error = %e, "not JSON; not restored"),
        }
    }
    let progress = |done, total| eprintln!("restored {done}/{total} objects");
    let report = crate::migrate::copy(&target, objects, &present, progress).await?;
    Ok(Summary {
        rev: target.current_rev(),
        objects: report.total,
        files,
    })
}

/// What the schedule reports on /metrics.
#[derive(Clone, Default)]
pub struct SnapshotMetrics {
    /// Unix time of the last snapshot written.
    pub last_success: Gauge<i64, AtomicI64>,
    pub failures: Counter,
}

/// Scheduled snapshots: where, how often, how many kept.
pub struct Schedule {
    pub data_dir: PathBuf,
    pub dir: PathBuf,
    pub interval: Duration,
    pub retention: usize,
}

/// Takes a snapshot every interval for the server's lifetime (the first one an interval after
/// start), keeping the newest `retention`. `etcd`: the server's store on etcd, read from
/// memory once current; None: the SQLite store of the data directory.
pub async fn schedule(s: Schedule, etcd: Option<Store>, metrics: SnapshotMetrics) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + s.interval, s.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match scheduled(&s, etcd.as_ref()).await {
            Ok(file) => {
                tracing::info!(file = %file.display(), "snapshot saved");
                metrics.last_success.set(chrono::Utc::now().timestamp());
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduled snapshot failed");
                metrics.failures.inc();
            }
        }
    }
}

async fn scheduled(s: &Schedule, etcd: Option<&Store>) -> Result<PathBuf, RestoreError> {
    let out = snapshot::scheduled_name(&s.dir)?;
    match etcd {
        Some(store) => {
            save_store(store, &s.data_dir, &out).await?;
        }
        None => {
            let (data_dir, file) = (s.data_dir.clone(), out.clone());
            tokio::task::spawn_blocking(move || snapshot::save(&data_dir, &file))
                .await
                .map_err(|e| StoreError::Backend(e.to_string()))??;
        }
    }
    snapshot::prune(&s.dir, s.retention)?;
    Ok(out)
}
