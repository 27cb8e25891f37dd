//! One sync step: decide full or partial, call the backend, clean UDP conntrack, record metrics.

use std::sync::Arc;
use std::time::Instant;

use crate::backend::{RuleBackend, SyncScope, SyncStats};
use crate::conntrack;
use crate::error::ProxyError;
use crate::exec::Runner;
use crate::metrics::Metrics;
use crate::model::ProxyModel;

pub struct Proxier {
    backend: Box<dyn RuleBackend>,
    conntrack: Option<Box<dyn Runner>>,
    metrics: Arc<Metrics>,
    /// The model of the last successful sync.
    last: Option<ProxyModel>,
}

impl Proxier {
    /// `conntrack` runs `conntrack -D` after syncs; `None` skips the cleanup (unit tests).
    pub fn new(
        backend: Box<dyn RuleBackend>,
        conntrack: Option<Box<dyn Runner>>,
        metrics: Arc<Metrics>,
    ) -> Proxier {
        Proxier {
            backend,
            conntrack,
            metrics,
            last: None,
        }
    }

    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The scope the next sync of `model` needs; `None` when nothing changed.
    pub fn scope_for(&self, model: &ProxyModel, force_full: bool) -> Option<SyncScope> {
        match &self.last {
            Some(last) if !force_full && last.node_ips == model.node_ips => {
                let changed = last.changed_services(model);
                (!changed.is_empty()).then_some(SyncScope::Partial(changed))
            }
            _ => Some(SyncScope::Full),
        }
    }

    /// Writes `model`. A partial sync rewrites only the services that differ from the last one.
    pub fn sync(&mut self, model: ProxyModel, force_full: bool) -> Result<SyncStats, ProxyError> {
        let start = Instant::now();
        let Some(scope) = self.scope_for(&model, force_full) else {
            return Ok(SyncStats::default());
        };
        let mut stats = match self.backend.sync(&model, &scope) {
            Ok(s) => s,
            Err(e) => {
                self.metrics.record_error();
                return Err(e);
            }
        };
        stats.took = start.elapsed();
        self.metrics
            .record_sync(stats.full, stats.took, stats.written);
        if let (Some(runner), Some(last)) = (&self.conntrack, &self.last) {
            let flows = conntrack::stale_udp_flows(last, &model);
            conntrack::delete_flows(runner.as_ref(), &flows);
        }
        tracing::debug!(
            full = stats.full,
            written = stats.written,
            took_ms = start.elapsed().as_millis() as u64,
            "synced"
        );
        self.last = Some(model);
        Ok(stats)
    }

    /// True when the canary says our rules were flushed from outside.
    pub fn rules_lost(&mut self) -> Result<bool, ProxyError> {
        self.backend.rules_lost()
    }
}
