//! What the ingress controller counts for /metrics (served with /healthz by keelson_daemon).

use std::sync::Arc;

use keelson_daemon::counter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub struct Metrics {
    pub registry: Arc<Registry>,
    pub reloads: Counter,
    pub reload_errors: Counter,
    pub handled_ingresses: Gauge,
    pub rejected_ingresses: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let handled_ingresses = Gauge::default();
        r.register(
            "ingress_handled_ingresses",
            "Ingresses of this controller's class",
            handled_ingresses.clone(),
        );
        let rejected_ingresses = Gauge::default();
        r.register(
            "ingress_rejected_ingresses",
            "Ingresses of this controller's class left out of the nginx configuration (bad values, or refused by nginx -t)",
            rejected_ingresses.clone(),
        );
        Metrics {
            reloads: counter(
                &mut r,
                "ingress_nginx_reloads",
                "nginx configurations loaded (start or reload)",
            ),
            reload_errors: counter(
                &mut r,
                "ingress_nginx_reload_errors",
                "Configurations nginx rejected or failed to load; the previous one kept serving",
            ),
            handled_ingresses,
            rejected_ingresses,
            registry: Arc::new(r),
        }
    }
}
