//! keelson_netpol_* metrics on /metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncLabels {
    /// "full" or "incremental".
    pub kind: String,
    /// "ok" or "error".
    pub result: String,
}

pub struct Metrics {
    pub syncs: Family<SyncLabels, Counter>,
    pub sync_seconds: Histogram,
    pub policies: Gauge,
    pub rules: Gauge,
    pub set_elements: Gauge,
    pub problems: Gauge,
}

impl Metrics {
    pub fn new(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            syncs: Family::default(),
            sync_seconds: Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]),
            policies: Gauge::default(),
            rules: Gauge::default(),
            set_elements: Gauge::default(),
            problems: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("keelson_netpol");
        r.register("syncs", "Rule loads by kind and result", m.syncs.clone());
        r.register(
            "sync_duration_seconds",
            "Time to compile and load the policy rules",
            m.sync_seconds.clone(),
        );
        let gauges = [
            ("policies", "NetworkPolicies in the cluster", &m.policies),
            ("rules", "Rules in the node's policy table", &m.rules),
            (
                "set_elements",
                "Elements in the node's policy sets (pod IPs, ranges, named ports)",
                &m.set_elements,
            ),
            (
                "problems",
                "Policy parts left out of the rules (they allow nothing)",
                &m.problems,
            ),
        ];
        for (name, help, gauge) in gauges {
            r.register(name, help, gauge.clone());
        }
        m
    }
}
