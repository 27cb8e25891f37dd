//! Prometheus metrics served on /metrics: pod start latency, CRI call latency, pod workers,
//! and the certificate manager's (upstream's names).

use std::sync::atomic::{AtomicI64, Ordering};
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
    certificates: Certificates,
    /// The last graceful node shutdown's start and end (unix seconds), once enabled.
    shutdown: [Gauge<f64, std::sync::atomic::AtomicU64>; 2],
    shutdown_registered: std::sync::Once,
}

/// The certificates the agent rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertKind {
    Client,
    Server,
}

impl CertKind {
    pub fn name(self) -> &'static str {
        match self {
            CertKind::Client => "client",
            CertKind::Server => "server",
        }
    }
}

/// Expiry (unix seconds, 0 while unknown) of each rotated certificate; the TTL gauges are
/// computed from it when scraped, and appear once a certificate is known.
#[derive(Default)]
struct Certificates {
    client_not_after: AtomicI64,
    server_not_after: AtomicI64,
    client_ttl: Gauge,
    server_ttl: Gauge,
    /// Upstream's is a counter named without `_total`; a gauge keeps the name scrapers know.
    client_renew_errors: Gauge,
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
            certificates: Certificates::default(),
            shutdown: Default::default(),
            shutdown_registered: std::sync::Once::new(),
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

    /// The rotated certificate of `kind` now expires at `not_after` (unix seconds).
    pub fn set_certificate_expiry(&self, kind: CertKind, not_after: i64) {
        let c = &self.certificates;
        let (cell, gauge, name, help) = match kind {
            CertKind::Client => (
                &c.client_not_after,
                &c.client_ttl,
                "kubelet_certificate_manager_client_ttl_seconds",
                "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired).",
            ),
            CertKind::Server => (
                &c.server_not_after,
                &c.server_ttl,
                "kubelet_certificate_manager_server_ttl_seconds",
                "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired).",
            ),
        };
        if cell.swap(not_after, Ordering::Relaxed) == 0 {
            if let Ok(mut registry) = self.registry.lock() {
                registry.register(name, help, gauge.clone());
                if kind == CertKind::Client {
                    registry.register(
                        "kubelet_certificate_manager_client_expiration_renew_errors",
                        "Counter of certificate renewal errors.",
                        c.client_renew_errors.clone(),
                    );
                }
            }
        }
    }

    /// A renewal of the `kind` certificate failed.
    pub fn certificate_renew_error(&self, kind: CertKind) {
        if kind == CertKind::Client {
            self.certificates.client_renew_errors.inc();
        }
    }

    /// The last graceful node shutdown's start and end, under upstream's names (registered
    /// once graceful shutdown is on; 0 while unknown).
    pub fn set_graceful_shutdown(
        &self,
        start: Option<k8s_openapi::jiff::Timestamp>,
        end: Option<k8s_openapi::jiff::Timestamp>,
    ) {
        let [start_gauge, end_gauge] = &self.shutdown;
        self.shutdown_registered.call_once(|| {
            if let Ok(mut registry) = self.registry.lock() {
                registry.register(
                    "kubelet_graceful_shutdown_start_time_seconds",
                    "Last graceful shutdown start time since unix epoch in seconds",
                    start_gauge.clone(),
                );
                registry.register(
                    "kubelet_graceful_shutdown_end_time_seconds",
                    "Last graceful shutdown end time since unix epoch in seconds",
                    end_gauge.clone(),
                );
            }
        });
        let seconds = |t: Option<k8s_openapi::jiff::Timestamp>| {
            t.map_or(0.0, |t| t.as_millisecond() as f64 / 1000.0)
        };
        start_gauge.set(seconds(start));
        end_gauge.set(seconds(end));
    }

    pub fn render(&self) -> String {
        let c = &self.certificates;
        let now = crate::bootstrap::unix_now();
        for (cell, gauge) in [
            (&c.client_not_after, &c.client_ttl),
            (&c.server_not_after, &c.server_ttl),
        ] {
            gauge.set(cell.load(Ordering::Relaxed) - now);
        }
        let mut out = String::new();
        if let Ok(registry) = self.registry.lock() {
            let _ = encode(&mut out, &registry);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_gauges_appear_once_known_under_upstreams_names() {
        let m = Metrics::new();
        assert!(!m.render().contains("kubelet_certificate_manager"));
        let in_an_hour = crate::bootstrap::unix_now() + 3600;
        m.set_certificate_expiry(CertKind::Client, in_an_hour);
        m.set_certificate_expiry(CertKind::Client, in_an_hour);
        m.certificate_renew_error(CertKind::Client);
        let text = m.render();
        let ttl = text
            .lines()
            .find_map(|l| l.strip_prefix("kubelet_certificate_manager_client_ttl_seconds "))
            .expect("client ttl");
        let ttl: i64 = ttl.parse().unwrap();
        assert!((3590..=3600).contains(&ttl), "{ttl}");
        assert!(text.contains("kubelet_certificate_manager_client_expiration_renew_errors 1\n"));
        assert!(!text.contains("server_ttl_seconds"));
        m.set_certificate_expiry(CertKind::Server, in_an_hour - 7200);
        assert!(m
            .render()
            .contains("kubelet_certificate_manager_server_ttl_seconds -3"));
    }
}
