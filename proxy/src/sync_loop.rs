//! The sync loop: waits until the inputs were listed once, batches bursts of changes (minimum
//! sync period), resyncs fully every sync period, and polls the canary.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::model::ProxyModel;
use crate::proxier::Proxier;

/// Where the loop gets its model from (the Kubernetes watches, or a fixed model in tests).
pub trait ModelSource: Send + Sync {
    /// True once every input has been listed completely at least once.
    fn ready(&self) -> bool;
    fn snapshot(&self) -> ProxyModel;
}

/// A source with a model set by hand.
#[derive(Default)]
pub struct StaticSource {
    pub model: Mutex<Option<ProxyModel>>,
}

impl ModelSource for StaticSource {
    fn ready(&self) -> bool {
        self.model.lock().map(|m| m.is_some()).unwrap_or(false)
    }

    fn snapshot(&self) -> ProxyModel {
        self.model
            .lock()
            .ok()
            .and_then(|m| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy)]
pub struct LoopConfig {
    pub min_sync_period: Duration,
    pub sync_period: Duration,
    pub canary_period: Duration,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            min_sync_period: Duration::from_secs(1),
            sync_period: Duration::from_secs(30),
            canary_period: Duration::from_secs(2),
        }
    }
}

/// Runs forever. `changed` is notified by the input watches on every event.
pub async fn run_sync_loop(
    proxier: Proxier,
    source: Arc<dyn ModelSource>,
    changed: Arc<Notify>,
    cfg: LoopConfig,
) {
    let proxier = Arc::new(Mutex::new(proxier));
    // Nothing is written before every input was listed: a partial view would delete rules.
    while !source.ready() {
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
    tracing::info!("inputs listed, starting to sync");
    let mut dirty = true;
    let mut force_full = true;
    let mut last_sync: Option<Instant> = None;
    let mut next_full = Instant::now() + cfg.sync_period;
    let mut next_canary = Instant::now() + cfg.canary_period;
    loop {
        let sync_at = match last_sync {
            Some(t) if dirty => Some(t + cfg.min_sync_period),
            None if dirty => Some(Instant::now()),
            _ => None,
        };
        let wake = [Some(next_full), Some(next_canary), sync_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(next_full);
        tokio::select! {
            _ = changed.notified() => { dirty = true; continue; }
            _ = sleep_until(wake) => {}
        }
        let now = Instant::now();
        if now >= next_canary {
            next_canary = now + cfg.canary_period;
            let p = proxier.clone();
            let lost = tokio::task::spawn_blocking(move || {
                p.lock()
                    .ok()
                    .map(|mut p| p.rules_lost())
                    .unwrap_or(Ok(false))
            })
            .await;
            match lost {
                Ok(Ok(true)) => {
                    tracing::warn!("canary gone: rules were flushed from outside, resyncing");
                    dirty = true;
                    force_full = true;
                    last_sync = None;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "canary check failed"),
                _ => {}
            }
        }
        if now >= next_full {
            dirty = true;
            force_full = true;
        }
        let due = match last_sync {
            Some(t) => now >= t + cfg.min_sync_period,
            None => true,
        };
        if !(dirty && due) {
            continue;
        }
        let model = source.snapshot();
        let p = proxier.clone();
        let full = force_full;
        let result =
            tokio::task::spawn_blocking(move || p.lock().ok().map(|mut p| p.sync(model, full)))
                .await;
        last_sync = Some(Instant::now());
        match result {
            Ok(Some(Ok(stats))) => {
                dirty = false;
                if stats.full || full {
                    next_full = Instant::now() + cfg.sync_period;
                }
                force_full = false;
            }
            Ok(Some(Err(e))) => {
                // Keep dirty: retried after the minimum sync period, as a full sync.
                tracing::error!(error = %e, "sync failed; retrying");
                force_full = true;
            }
            _ => tracing::error!("sync task panicked or its lock is poisoned"),
        }
    }
}
