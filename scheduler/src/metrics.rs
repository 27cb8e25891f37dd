//! What the scheduler counts for /metrics (served by keelson_daemon), with upstream's names.

use crate::plugins::Plugin;
use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

type Labels = Vec<(&'static str, String)>;
type Durations = Family<Labels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub scheduled: Counter,
    pub unschedulable: Counter,
    /// Upstream's scheduler_preemption_attempts_total: Pods that fit nowhere and went to
    /// preemption, whether or not it found victims.
    pub preemption_attempts: Counter,
    /// Upstream's scheduler_preemption_victims: victims per preemption, same buckets.
    pub preemption_victims: Histogram,
    /// scheduler_schedule_attempts_total{result, profile}.
    pub attempts: Family<Labels, Counter>,
    /// scheduler_scheduling_attempt_duration_seconds{result, profile}.
    pub attempt_duration: Durations,
    /// scheduler_framework_extension_point_duration_seconds{extension_point, status, profile}.
    extension_points: Durations,
    /// scheduler_plugin_execution_duration_seconds{plugin, extension_point, status}: sampled
    /// in one cycle of ten, as upstream's pluginMetricsSamplePercent.
    plugins: Durations,
}

fn attempt_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn extension_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

fn plugin_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00001, 1.5, 20))
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
        let attempts = Family::<Labels, Counter>::default();
        r.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            attempts.clone(),
        );
        let attempt_duration: Durations = Family::new_with_constructor(attempt_buckets);
        r.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            attempt_duration.clone(),
        );
        let extension_points: Durations = Family::new_with_constructor(extension_buckets);
        r.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point",
            extension_points.clone(),
        );
        let plugins: Durations = Family::new_with_constructor(plugin_buckets);
        r.register(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point",
            plugins.clone(),
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
            attempts,
            attempt_duration,
            extension_points,
            plugins,
            registry: Arc::new(r),
        }
    }
}

/// Times one cycle's extension points (always) and plugins (when the cycle is sampled). A
/// sampled cycle's plugin calls (one per node and filter, the first 256) are kept and observed
/// when it ends, one histogram lookup per plugin, extension point and status.
pub struct Timer<'a> {
    metrics: Option<&'a Metrics>,
    profile: &'a str,
    sampled: bool,
    samples: RefCell<Vec<(Plugin, &'static str, &'static str, f64)>>,
}

/// Observes the extension point's duration when dropped.
pub struct Span<'t> {
    metrics: Option<&'t Metrics>,
    profile: &'t str,
    point: &'static str,
    start: Instant,
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.metrics {
            let labels = vec![
                ("extension_point", self.point.to_string()),
                ("status", "Success".to_string()),
                ("profile", self.profile.to_string()),
            ];
            m.extension_points
                .get_or_create(&labels)
                .observe(self.start.elapsed().as_secs_f64());
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        let Some(m) = self.metrics else { return };
        let mut samples = std::mem::take(self.samples.get_mut());
        samples.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        for group in samples.chunk_by(|a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2)) {
            let (plugin, point, status, _) = group[0];
            let labels = vec![
                ("plugin", plugin.name().to_string()),
                ("extension_point", point.to_string()),
                ("status", status.to_string()),
            ];
            let histogram = m.plugins.get_or_create(&labels);
            for s in group {
                histogram.observe(s.3);
            }
        }
    }
}

impl<'a> Timer<'a> {
    /// No metrics (unit tests, the dry runs of preemption).
    pub fn none() -> Timer<'static> {
        Timer {
            metrics: None,
            profile: "",
            sampled: false,
            samples: RefCell::new(Vec::new()),
        }
    }

    pub fn new(metrics: &'a Metrics, profile: &'a str, sampled: bool) -> Timer<'a> {
        Timer {
            metrics: Some(metrics),
            profile,
            sampled,
            samples: RefCell::new(Vec::new()),
        }
    }

    pub fn extension(&self, point: &'static str) -> Span<'_> {
        Span {
            metrics: self.metrics,
            profile: self.profile,
            point,
            start: Instant::now(),
        }
    }

    /// Runs `f` as `plugin` at `point`, timed when the cycle is sampled.
    pub fn plugin<R: Outcome>(
        &self,
        plugin: Plugin,
        point: &'static str,
        f: impl FnOnce() -> R,
    ) -> R {
        // A sampled cycle times its first calls only: enough for the histograms, while a
        // cycle over 5,000 nodes would otherwise spend more on clocks than on filters.
        const MAX_SAMPLES: usize = 256;
        if !self.sampled || self.metrics.is_none() || self.samples.borrow().len() >= MAX_SAMPLES {
            return f();
        }
        let start = Instant::now();
        let out = f();
        let took = start.elapsed().as_secs_f64();
        self.samples
            .borrow_mut()
            .push((plugin, point, out.status(), took));
        out
    }
}

/// A plugin call's status label.
pub trait Outcome {
    fn status(&self) -> &'static str {
        "Success"
    }
}

impl<T> Outcome for Option<T> {}
impl Outcome for Vec<i64> {}
impl Outcome for Result<(), crate::plugins::Reject> {
    fn status(&self) -> &'static str {
        match self {
            Ok(()) => "Success",
            Err(r) if r.resolvable => "Unschedulable",
            Err(_) => "UnschedulableAndUnresolvable",
        }
    }
}
