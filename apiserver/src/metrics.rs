//! Prometheus metrics: request counts and latencies per verb and resource, as upstream names them,
//! and the time left on the certificates the server was started with.

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
pub struct CertificateLabels {
    /// serving, ca, kubelet-client.
    pub certificate: String,
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
    /// Seconds left on each certificate in use, computed from `not_after` when scraped.
    certificate_ttl: Family<CertificateLabels, Gauge<i64, AtomicI64>>,
    not_after: std::sync::Mutex<Vec<(String, i64)>>,
    pub snapshots: crate::snapshot::SnapshotMetrics,
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
        let certificate_ttl = Family::default();
        registry.register(
            "apiserver_certificate_expiration_seconds",
            "Seconds until the certificate the server uses expires (negative once expired), by certificate: serving, ca, kubelet-client",
            certificate_ttl.clone(),
        );
        let snapshots = crate::snapshot::SnapshotMetrics::default();
        registry.register(
            "keelson_apiserver_snapshot_last_success_timestamp_seconds",
            "Unix time of the last scheduled snapshot of the store written",
            snapshots.last_success.clone(),
        );
        registry.register(
            "keelson_apiserver_snapshot_failures",
            "Scheduled snapshots of the store that failed",
            snapshots.failures.clone(),
        );
        Metrics {
            snapshots,
            certificate_ttl,
            not_after: Default::default(),
            registry,
            audit_events,
            audit_errors,
            requests,
            latency,
            watchers,
        }
    }

    /// The server uses the certificate `pem` as `name`.
    pub fn certificate_in_use(&self, name: &str, pem: &[u8]) {
        let Some(at) = keelson_daemon::x509::not_after(pem) else {
            return;
        };
        if let Ok(mut list) = self.not_after.lock() {
            list.retain(|(n, _)| n != name);
            list.push((name.to_string(), at));
        }
    }

    pub fn encode(&self) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if let Ok(list) = self.not_after.lock() {
            for (name, at) in list.iter() {
                let labels = CertificateLabels {
                    certificate: name.clone(),
                };
                self.certificate_ttl.get_or_create(&labels).set(at - now);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_in_use_show_their_seconds_left() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a".to_string()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2099, 1, 1);
        let pem = params.self_signed(&key).unwrap().pem();
        let m = Metrics::new();
        m.certificate_in_use("serving", pem.as_bytes());
        m.certificate_in_use("serving", pem.as_bytes());
        m.certificate_in_use("ca", b"not a certificate");
        let text = m.encode();
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("apiserver_certificate_expiration_seconds{certificate=\"serving\"}")
            })
            .unwrap_or_else(|| panic!("{text}"));
        let left: i64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        // 2099-01-01T00:00:00Z
        let expected = 4_070_908_800 - now;
        assert!((expected - 10..=expected).contains(&left), "{line}");
        assert!(!text.contains("certificate=\"ca\""), "{text}");
    }
}
