//! What the controller manager counts for /metrics (served by keelson_daemon).

use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub reconciles: Counter,
    pub errors: Counter,
    pub taint_evictions: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        Metrics {
            reconciles: counter(
                &mut r,
                "keelson_controller_reconciles",
                "Reconciles finished",
            ),
            errors: counter(
                &mut r,
                "keelson_controller_reconcile_errors",
                "Reconciles that failed and were retried",
            ),
            taint_evictions: counter(
                &mut r,
                "keelson_taint_eviction_pod_deletions",
                "Pods deleted from nodes with NoExecute taints they do not tolerate (long enough)",
            ),
            registry: Arc::new(r),
        }
    }
}
