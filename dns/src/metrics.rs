//! /metrics: requests by response code (CoreDNS's coredns_dns_responses_total, by rcode).

use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone)]
pub struct Metrics {
    responses: Family<Vec<(String, String)>, Counter>,
    forwarded: Counter,
    cache_hits: Family<Vec<(String, String)>, Counter>,
    cache_misses: Counter,
    cache_entries: Gauge,
    pub services: Gauge,
    registry: Arc<Registry>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let responses = Family::<Vec<(String, String)>, Counter>::default();
        r.register(
            "keelson_dns_responses",
            "DNS responses sent, by response code",
            responses.clone(),
        );
        let forwarded = keelson_daemon::counter(
            &mut r,
            "keelson_dns_forwarded_requests",
            "Questions outside the cluster's zones asked of the upstreams (cache misses)",
        );
        let cache_hits = Family::<Vec<(String, String)>, Counter>::default();
        r.register(
            "keelson_dns_cache_hits",
            "Forwarded questions answered from the cache, by type (success or denial)",
            cache_hits.clone(),
        );
        let cache_misses = keelson_daemon::counter(
            &mut r,
            "keelson_dns_cache_misses",
            "Forwarded questions the cache had no answer for",
        );
        let cache_entries = Gauge::default();
        r.register(
            "keelson_dns_cache_entries",
            "Answers in the cache",
            cache_entries.clone(),
        );
        let services = Gauge::default();
        r.register(
            "keelson_dns_services",
            "Services in the zone served",
            services.clone(),
        );
        Metrics {
            responses,
            forwarded,
            cache_hits,
            cache_misses,
            cache_entries,
            services,
            registry: Arc::new(r),
        }
    }

    pub fn response(&self, code: ResponseCode) {
        let label = vec![("rcode".to_string(), rcode_name(code).to_string())];
        self.responses.get_or_create(&label).inc();
    }

    pub fn forwarded(&self) {
        self.forwarded.inc();
    }

    pub fn cache_hit(&self, kind: &str) {
        let label = vec![("type".to_string(), kind.to_string())];
        self.cache_hits.get_or_create(&label).inc();
    }

    pub fn cache_miss(&self) {
        self.cache_misses.inc();
    }

    pub fn cache_entries(&self, n: usize) {
        self.cache_entries.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The mnemonic as `dig` and CoreDNS's metrics print it.
fn rcode_name(code: ResponseCode) -> &'static str {
    match code {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        _ => "OTHER",
    }
}
