//! What the scheduler counts for /metrics (served by keelson_daemon).

use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub scheduled: Counter,
    pub unschedulable: Counter,
    /// Upstream's scheduler_preemption_attempts_total: Pods that fit nowhere and went to
    /// preemption, whether or not it found victims.
    pub preemption_attempts: Counter,
    /// Upstream's scheduler_preemption_victims: victims per preemption, same buckets.
    pub preemption_victims: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        r.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            preemption_victims.clone(),
        );
        Metrics {
            scheduled: counter(&mut r, "scheduler_pods_bound", "Pods bound to a node"),
            unschedulable: counter(
                &mut r,
                "scheduler_unschedulable_attempts",
                "Attempts that found no node",
            ),
            preemption_attempts: counter(
                &mut r,
                "scheduler_preemption_attempts",
                "Total preemption attempts in the cluster till now",
            ),
            preemption_victims,
            registry: Arc::new(r),
        }
    }
}
