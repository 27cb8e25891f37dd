//! The balancer's Prometheus metrics, one series per API server (`server="host:port"`), so an
//! operator sees which servers it counts as ready and where the connections went. Every series
//! exists from the start (at 0): a server that never took a connection still shows up.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::pool::Health;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    server: String,
    result: &'static str,
}

/// One API server's series (handles into the registered families).
pub struct ServerMetrics {
    ready: Gauge,
    connections: Counter,
    active: Gauge,
    connect_failures: Counter,
    /// Health checks by result: ready, not_ready, down.
    checks: [Counter; 3],
}

impl ServerMetrics {
    /// What a check or a connect found out.
    pub fn observed(&self, now: Health) {
        self.ready.set(i64::from(now == Health::Ready));
    }

    /// A health check's result.
    pub fn checked(&self, result: Health) {
        let i = match result {
            Health::Ready => 0,
            Health::NotReady | Health::Unknown => 1,
            Health::Down => 2,
        };
        if let Some(c) = self.checks.get(i) {
            c.inc();
        }
    }

    pub fn connect_failed(&self) {
        self.connect_failures.inc();
    }

    /// A client's connection was forwarded; it counts as active until the guard drops.
    pub fn connected(&self) -> ActiveConnection {
        self.connections.inc();
        self.active.inc();
        ActiveConnection(self.active.clone())
    }
}

/// Counts one forwarded connection as active while it lives (however the copy ends).
pub struct ActiveConnection(Gauge);

impl Drop for ActiveConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Registers the families in `registry`, with a series for each of `endpoints` (host:port), and
/// returns the series in the endpoints' order.
pub fn register(registry: &mut Registry, endpoints: &[String]) -> Vec<ServerMetrics> {
    let ready = Family::<ServerLabels, Gauge>::default();
    let connections = Family::<ServerLabels, Counter>::default();
    let active = Family::<ServerLabels, Gauge>::default();
    let connect_failures = Family::<ServerLabels, Counter>::default();
    let checks = Family::<CheckLabels, Counter>::default();
    registry.register(
        "keelson_lb_backend_ready",
        "1 while the API server's /readyz answers 200 (its last health check or connect)",
        ready.clone(),
    );
    registry.register(
        "keelson_lb_connections",
        "Client connections forwarded to the API server",
        connections.clone(),
    );
    registry.register(
        "keelson_lb_connections_active",
        "Client connections to the API server open now",
        active.clone(),
    );
    registry.register(
        "keelson_lb_connect_failures",
        "Connects to the API server that failed or timed out",
        connect_failures.clone(),
    );
    registry.register(
        "keelson_lb_health_checks",
        "Health checks of the API server by result (ready, not_ready, down)",
        checks.clone(),
    );
    endpoints
        .iter()
        .map(|server| {
            let labels = ServerLabels {
                server: server.clone(),
            };
            let check = |result| {
                let labels = CheckLabels {
                    server: server.clone(),
                    result,
                };
                checks.get_or_create(&labels).clone()
            };
            ServerMetrics {
                ready: ready.get_or_create(&labels).clone(),
                connections: connections.get_or_create(&labels).clone(),
                active: active.get_or_create(&labels).clone(),
                connect_failures: connect_failures.get_or_create(&labels).clone(),
                checks: [check("ready"), check("not_ready"), check("down")],
            }
        })
        .collect()
}
