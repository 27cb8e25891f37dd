//! The proxy's metrics, and its liveness: /healthz (served by keelson-daemon) fails when syncs stop.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn new_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

pub struct Metrics {
    registry: Arc<Registry>,
    sync_duration: Family<Labels, Histogram, fn() -> Histogram>,
    written: Family<Labels, Counter>,
    last_written: Gauge,
    last_sync: Gauge<f64, AtomicU64>,
    errors: Counter,
    /// LoadBalancer addresses this node answers ARP for (its speaker won their election).
    pub announced: Gauge,
    last_success: Mutex<Option<Instant>>,
    /// /healthz fails when no sync succeeded for this long.
    stale_after: Duration,
}

impl Metrics {
    pub fn new(stale_after: Duration) -> Metrics {
        let mut registry = Registry::with_prefix("keelson_proxy");
        let sync_duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            new_histogram as fn() -> Histogram,
        );
        let written = Family::<Labels, Counter>::default();
        let last_written = Gauge::default();
        let last_sync = Gauge::<f64, AtomicU64>::default();
        let errors = Counter::default();
        registry.register(
            "sync_duration_seconds",
            "Duration of rule syncs, by kind (full, partial)",
            sync_duration.clone(),
        );
        registry.register(
            "rules_written",
            "Rules (iptables) or map elements (nftables) written, by kind",
            written.clone(),
        );
        registry.register(
            "last_sync_rules_written",
            "Rules or elements written by the last sync",
            last_written.clone(),
        );
        registry.register(
            "last_sync_timestamp_seconds",
            "Unix time of the last successful sync",
            last_sync.clone(),
        );
        registry.register("sync_errors", "Failed syncs", errors.clone());
        let announced = Gauge::default();
        registry.register(
            "load_balancer_addresses_announced",
            "LoadBalancer addresses this node announces on its segment (ARP)",
            announced.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            sync_duration,
            written,
            last_written,
            last_sync,
            errors,
            announced,
            last_success: Mutex::new(None),
            stale_after,
        }
    }

    pub fn record_sync(&self, full: bool, took: Duration, written: usize) {
        let labels = vec![(
            "kind".to_string(),
            if full { "full" } else { "partial" }.to_string(),
        )];
        self.sync_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.written.get_or_create(&labels).inc_by(written as u64);
        self.last_written.set(written as i64);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        self.last_sync.set(now);
        if let Ok(mut l) = self.last_success.lock() {
            *l = Some(Instant::now());
        }
    }

    pub fn record_error(&self) {
        self.errors.inc();
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// `Ok` while syncs keep succeeding, else why not.
    pub fn health(&self) -> Result<(), String> {
        let last = self.last_success.lock().map(|l| *l).unwrap_or(None);
        match last {
            None => Err("no successful sync yet".to_string()),
            Some(t) if t.elapsed() > self.stale_after => Err(format!(
                "last successful sync {}s ago (limit {}s)",
                t.elapsed().as_secs(),
                self.stale_after.as_secs()
            )),
            Some(_) => Ok(()),
        }
    }
}
