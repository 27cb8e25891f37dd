//! `keelson-apiserver snapshot save|restore`, and the scheduled snapshots a running server
//! takes of its own store (`--snapshot-interval`, `--snapshot-retention`, as k3s's).

use crate::options::SnapshotAction;
use crate::store::snapshot::{self, SnapshotError};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::time::Duration;

/// Runs one `snapshot` command; returns what to print.
pub fn command(data_dir: &Path, action: &SnapshotAction) -> Result<String, SnapshotError> {
    match action {
        SnapshotAction::Save { file } => {
            let s = snapshot::save(data_dir, file)?;
            Ok(format!("saved {s} to {}\n", file.display()))
        }
        SnapshotAction::Restore {
            file,
            bump_revision,
        } => {
            let s = snapshot::restore(file, data_dir, *bump_revision)?;
            Ok(format!(
                "restored {s} into {}\nstart keelson-apiserver with --data-dir {} to serve them; \
                 clients watching from an older resourceVersion get 410 Gone and list again\n",
                data_dir.display(),
                data_dir.display()
            ))
        }
    }
}

/// What the schedule reports on /metrics.
#[derive(Clone, Default)]
pub struct SnapshotMetrics {
    /// Unix time of the last snapshot written.
    pub last_success: Gauge<i64, AtomicI64>,
    pub failures: Counter,
}

/// Takes a snapshot every `interval` for the server's lifetime (the first one interval after
/// start), keeping the newest `retention`.
pub async fn schedule(
    data_dir: PathBuf,
    dir: PathBuf,
    interval: Duration,
    retention: usize,
    metrics: SnapshotMetrics,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (data, to) = (data_dir.clone(), dir.clone());
        let made =
            tokio::task::spawn_blocking(move || snapshot::scheduled(&data, &to, retention)).await;
        match made {
            Ok(Ok(file)) => {
                tracing::info!(file = %file.display(), "snapshot saved");
                let now = chrono::Utc::now().timestamp();
                metrics.last_success.set(now);
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "scheduled snapshot failed");
                metrics.failures.inc();
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduled snapshot failed");
                metrics.failures.inc();
            }
        }
    }
}
