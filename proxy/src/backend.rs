//! The one interface every rule backend implements, and a recording fake for tests.

use std::sync::{Arc, Mutex};

use crate::error::ProxyError;
use crate::model::{ProxyModel, ServicePortName};

/// What a sync has to cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncScope {
    /// Rewrite everything and remove anything stale (start, periodic resync, after a flush).
    Full,
    /// Only these service ports changed since the last successful sync.
    Partial(Vec<ServicePortName>),
}

/// What one sync wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// True when the backend did a full sync (it may upgrade a partial one).
    pub full: bool,
    /// Rules (iptables lines) or elements (nft) written.
    pub written: usize,
    /// From the start of the sync until the kernel had the rules (set by the proxier).
    pub took: std::time::Duration,
}

/// A kernel rule backend (iptables, nftables).
pub trait RuleBackend: Send {
    fn name(&self) -> &'static str;

    /// Brings the kernel rules in line with `model`, in one transaction.
    fn sync(&mut self, model: &ProxyModel, scope: &SyncScope) -> Result<SyncStats, ProxyError>;

    /// Checks the canary; true when rules were removed from outside and a full sync is due.
    fn rules_lost(&mut self) -> Result<bool, ProxyError>;
}

/// One call seen by the recording backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedSync {
    pub model: ProxyModel,
    pub scope: SyncScope,
}

/// A backend that records what it was asked to do; `lost` makes `rules_lost` answer true once.
#[derive(Clone, Default)]
pub struct RecordingBackend {
    pub syncs: Arc<Mutex<Vec<RecordedSync>>>,
    pub lost: Arc<Mutex<bool>>,
}

impl RecordingBackend {
    pub fn recorded(&self) -> Vec<RecordedSync> {
        self.syncs.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl RuleBackend for RecordingBackend {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn sync(&mut self, model: &ProxyModel, scope: &SyncScope) -> Result<SyncStats, ProxyError> {
        if let Ok(mut s) = self.syncs.lock() {
            s.push(RecordedSync {
                model: model.clone(),
                scope: scope.clone(),
            });
        }
        Ok(SyncStats {
            full: *scope == SyncScope::Full,
            written: model.services.len(),
            ..SyncStats::default()
        })
    }

    fn rules_lost(&mut self) -> Result<bool, ProxyError> {
        Ok(self
            .lost
            .lock()
            .map(|mut l| std::mem::replace(&mut *l, false))
            .unwrap_or(false))
    }
}
