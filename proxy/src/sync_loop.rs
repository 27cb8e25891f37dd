//! The sync loop: waits until the inputs were listed once, batches bursts of changes (minimum
//! sync period), resyncs fully every sync period, and polls the canary.
//!
//! Changes arrive through `keelson_daemon::Changes` and the loop stops on `Shutdown`, like every
//! daemon's. It does not use `keelson_daemon::SyncLoop`: that one debounces (waits after each
//! change), while the proxy rate-limits like kube-proxy's BoundedFrequencyRunner (a change after a
//! quiet period is written at once, then at most one sync per minimum sync period), tells the
//! proxier whether a sync must be full (periodic resync, lost canary, failed sync) and polls the
//! canary between syncs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keelson_daemon::{Changes, Shutdown};
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

/// Runs until `shutdown`. `changes` is notified by the input watches on every event. A sync in
/// progress is finished first.
pub async fn run_sync_loop(
    proxier: Proxier,
    source: Arc<dyn ModelSource>,
    changes: Changes,
    cfg: LoopConfig,
    shutdown: Shutdown,
) {
    tokio::select! {
        _ = wait_ready(source.as_ref(), &changes) => {}
        _ = shutdown.requested() => return,
    }
    tracing::info!("inputs listed, starting to sync");
    let mut state = LoopState::new(proxier, source, cfg);
    loop {
        tokio::select! {
            _ = changes.changed() => { state.dirty = true; continue; }
            _ = sleep_until(state.wake_at()) => {}
            _ = shutdown.requested() => break,
        }
        let now = Instant::now();
        if now >= state.next_canary {
            state.check_canary(now).await;
        }
        if now >= state.next_full {
            state.dirty = true;
            state.force_full = true;
        }
        if state.dirty && state.due(now) {
            state.sync().await;
        }
    }
    tracing::info!("sync loop stopped");
}

/// Nothing is written before every input was listed: a partial view would delete rules.
async fn wait_ready(source: &dyn ModelSource, changes: &Changes) {
    while !source.ready() {
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// What the loop remembers between wake-ups.
struct LoopState {
    proxier: Arc<Mutex<Proxier>>,
    source: Arc<dyn ModelSource>,
    cfg: LoopConfig,
    /// Inputs changed (or a sync failed) since the last successful sync.
    dirty: bool,
    /// The next sync rewrites everything.
    force_full: bool,
    last_sync: Option<Instant>,
    next_full: Instant,
    next_canary: Instant,
}

impl LoopState {
    fn new(proxier: Proxier, source: Arc<dyn ModelSource>, cfg: LoopConfig) -> LoopState {
        let now = Instant::now();
        LoopState {
            proxier: Arc::new(Mutex::new(proxier)),
            source,
            cfg,
            dirty: true,
            force_full: true,
            last_sync: None,
            next_full: now + cfg.sync_period,
            next_canary: now + cfg.canary_period,
        }
    }

    /// The earliest of: the periodic full sync, the canary check, the next allowed sync if dirty.
    fn wake_at(&self) -> Instant {
        let sync_at = match self.last_sync {
            Some(t) if self.dirty => Some(t + self.cfg.min_sync_period),
            None if self.dirty => Some(Instant::now()),
            _ => None,
        };
        [self.next_full, self.next_canary]
            .into_iter()
            .chain(sync_at)
            .min()
            .unwrap_or(self.next_full)
    }

    /// Whether the minimum sync period since the last sync has passed.
    fn due(&self, now: Instant) -> bool {
        self.last_sync
            .is_none_or(|t| now >= t + self.cfg.min_sync_period)
    }

    /// Rules flushed from outside (the canary is gone): a full sync at once.
    async fn check_canary(&mut self, now: Instant) {
        self.next_canary = now + self.cfg.canary_period;
        let p = self.proxier.clone();
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
                self.dirty = true;
                self.force_full = true;
                self.last_sync = None;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "canary check failed"),
            _ => {}
        }
    }

    /// One sync of the current model; a failure stays dirty and is retried as a full sync after
    /// the minimum sync period.
    async fn sync(&mut self) {
        let model = self.source.snapshot();
        let p = self.proxier.clone();
        let full = self.force_full;
        let result =
            tokio::task::spawn_blocking(move || p.lock().ok().map(|mut p| p.sync(model, full)))
                .await;
        self.last_sync = Some(Instant::now());
        match result {
            Ok(Some(Ok(stats))) => {
                self.dirty = false;
                if stats.full || full {
                    self.next_full = Instant::now() + self.cfg.sync_period;
                }
                self.force_full = false;
            }
            Ok(Some(Err(e))) => {
                tracing::error!(error = %e, "sync failed; retrying");
                self.force_full = true;
            }
            _ => tracing::error!("sync task panicked or its lock is poisoned"),
        }
    }
}
