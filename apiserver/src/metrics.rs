//! Prometheus metrics: request counts and latencies per verb and resource, as upstream names them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicI64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub resource: String,
    pub subresource: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub verb: String,
    pub resource: String,
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<LatencyLabels, Histogram>,
    pub watchers: Gauge<i64, AtomicI64>,
    /// Audit events made, and those dropped or not written (the log backend's errors).
    pub audit_events: Counter,
    pub audit_errors: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let watchers = Gauge::default();
        registry.register(
            "apiserver_request",
            "Requests by verb, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency by verb and resource (to the first byte for watches)",
            latency.clone(),
        );
        registry.register(
            "apiserver_registered_watchers",
            "Open watches",
            watchers.clone(),
        );
        let (audit_events, audit_errors) = (Counter::default(), Counter::default());
        registry.register(
            "apiserver_audit_event",
            "Audit events generated and sent to the audit log",
            audit_events.clone(),
        );
        registry
            .sub_registry_with_label(("plugin".into(), "log".into()))
            .register(
                "apiserver_audit_error",
                "Audit events dropped (the log's writer fell behind) or not written",
                audit_errors.clone(),
            );
        Metrics {
            registry,
            audit_events,
            audit_errors,
            requests,
            latency,
            watchers,
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
