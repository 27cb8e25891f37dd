//! Prometheus metrics served on /metrics: pod start latency, CRI call latency, pod workers.

use std::sync::Mutex;

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    call: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    pod_start: Histogram,
    start_phases: Family<PhaseLabels, Histogram>,
    cri_calls: Family<CallLabels, Histogram>,
    pub pod_workers: Gauge,
    relist: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let pod_start = Histogram::new(exponential_buckets(0.05, 2.0, 12));
        let cri_calls = Family::<CallLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        let start_phases = Family::<PhaseLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        let pod_workers = Gauge::default();
        let relist = Histogram::new(exponential_buckets(0.001, 2.0, 12));
        registry.register(
            "keelson_agent_pod_start_duration_seconds",
            "Time from pod creation to all containers running, as seen by the agent",
            pod_start.clone(),
        );
        registry.register(
            "keelson_agent_pod_start_phase_seconds",
            "Time a pod's first start spent in each phase, from the agent's first sync to the status write",
            start_phases.clone(),
        );
        registry.register(
            "keelson_agent_cri_call_duration_seconds",
            "CRI call latency by call",
            cri_calls.clone(),
        );
        registry.register(
            "keelson_agent_pod_workers",
            "Pod workers running",
            pod_workers.clone(),
        );
        registry.register(
            "keelson_agent_relist_duration_seconds",
            "Time to list the node's sandboxes and containers (every second)",
            relist.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            pod_start,
            start_phases,
            cri_calls,
            pod_workers,
            relist,
        }
    }

    pub fn observe_cri(&self, call: &str, seconds: f64) {
        self.cri_calls
            .get_or_create(&CallLabels {
                call: call.to_string(),
            })
            .observe(seconds);
    }

    pub fn observe_relist(&self, seconds: f64) {
        self.relist.observe(seconds);
    }

    pub fn observe_pod_start(&self, seconds: f64) {
        self.pod_start.observe(seconds);
    }

    pub fn observe_start_phase(&self, phase: &'static str, seconds: f64) {
        self.start_phases
            .get_or_create(&PhaseLabels { phase })
            .observe(seconds);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Ok(registry) = self.registry.lock() {
            let _ = encode(&mut out, &registry);
        }
        out
    }
}
