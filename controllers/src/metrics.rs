//! What the controller manager counts for /metrics (served by keelson_daemon).

use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub reconciles: Counter,
    pub errors: Counter,
    pub taint_evictions: Counter,
    pub node_cidr_allocations: Counter,
    pub node_cidrs_in_use: Gauge,
    pub load_balancer_allocations: Counter,
    pub load_balancer_ips_in_use: Gauge,
    pub csr_approvals: Counter,
    pub csr_issued: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        Metrics {
            reconciles: counter(
                &mut r,
                "keelson_controller_reconciles",
                "Reconciles finished",
            ),
            errors: counter(
                &mut r,
                "keelson_controller_reconcile_errors",
                "Reconciles that failed and were retried",
            ),
            taint_evictions: counter(
                &mut r,
                "keelson_taint_eviction_pod_deletions",
                "Pods deleted from nodes with NoExecute taints they do not tolerate (long enough)",
            ),
            node_cidr_allocations: counter(
                &mut r,
                "keelson_nodeipam_cidr_allocations",
                "Pod CIDRs written to Nodes",
            ),
            node_cidrs_in_use: {
                let g = Gauge::default();
                r.register(
                    "keelson_nodeipam_cidrs_in_use",
                    "Blocks of --cluster-cidr held by Nodes",
                    g.clone(),
                );
                g
            },
            load_balancer_allocations: counter(
                &mut r,
                "keelson_loadbalancer_ip_allocations",
                "Addresses of --load-balancer-ip-range written to Services",
            ),
            load_balancer_ips_in_use: {
                let g = Gauge::default();
                r.register(
                    "keelson_loadbalancer_ips_in_use",
                    "Addresses of --load-balancer-ip-range held by Services",
                    g.clone(),
                );
                g
            },
            csr_approvals: counter(
                &mut r,
                "keelson_csr_auto_approvals",
                "CertificateSigningRequests auto-approved (node client certificates)",
            ),
            csr_issued: counter(
                &mut r,
                "keelson_csr_certificates_issued",
                "Certificates issued for approved CertificateSigningRequests",
            ),
            registry: Arc::new(r),
        }
    }
}
