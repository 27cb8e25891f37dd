//! What the scheduler counts for /metrics (served by keelson_daemon).

use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub scheduled: Counter,
    pub unschedulable: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        Metrics {
            scheduled: counter(&mut r, "scheduler_pods_bound", "Pods bound to a node"),
            unschedulable: counter(
                &mut r,
                "scheduler_unschedulable_attempts",
                "Attempts that found no node",
            ),
            registry: Arc::new(r),
        }
    }
}
