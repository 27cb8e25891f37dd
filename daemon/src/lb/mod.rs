//! A client-side load balancer in front of several API servers, as k3s and rke2 run on every
//! node: a TCP listener on loopback that forwards each connection to a healthy server. Clients
//! (the agent, the proxy, kubectl) keep one kubeconfig pointing at it and need no failover of
//! their own; TLS passes through untouched, so they still verify the server with the cluster CA
//! (every API server's certificate holds 127.0.0.1).
//!
//! Each server is checked every interval (TCP connect, then `/readyz`); a connection goes to the
//! server in use while it is ready, else to the next ready one, and moves on when a connect
//! fails. When a server stops being ready its open connections (long watches included) are
//! closed, so clients reconnect to another server instead of waiting on a dead one.
//!
//! `health_and_metrics` gives what to serve on /healthz, /readyz (ready while at least one
//! server is) and /metrics (`keelson_lb_*`, per server).

mod metrics;
mod pool;
mod probe;

pub use pool::{Health, Pool};

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::rustls::ClientConfig;

#[derive(Debug, thiserror::Error)]
pub enum LoadBalancerError {
    #[error("--apiserver-endpoints: {0:?} is not an API server address (https://HOST:PORT)")]
    BadEndpoint(String),
    #[error("--apiserver-endpoints: no API server given")]
    NoEndpoints,
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS client for the health checks: {0}")]
    Tls(#[from] tokio_rustls::rustls::Error),
}

/// How long a connect or a health check may take before the server counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What the balancer listens on and which servers it forwards to.
#[derive(Clone, Debug)]
pub struct LoadBalancerConfig {
    pub listen: SocketAddr,
    /// host:port of each API server (see `parse_endpoints`).
    pub endpoints: Vec<String>,
    pub health_check_interval: Duration,
}

/// `https://10.0.0.1:6443,https://cp2:6443` (or without `https://`; the port defaults to
/// 6443) to host:port strings.
pub fn parse_endpoints(list: &str) -> Result<Vec<String>, LoadBalancerError> {
    let endpoints = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_endpoint)
        .collect::<Result<Vec<_>, _>>()?;
    if endpoints.is_empty() {
        return Err(LoadBalancerError::NoEndpoints);
    }
    Ok(endpoints)
}

fn parse_endpoint(s: &str) -> Result<String, LoadBalancerError> {
    let bad = || LoadBalancerError::BadEndpoint(s.to_string());
    let rest = s.strip_prefix("https://").unwrap_or(s);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains("://") || rest.contains('/') || rest.is_empty() {
        return Err(bad());
    }
    // A port is there when the text after the last ':' is outside an IPv6 address's brackets.
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') && (!h.contains(':') || h.ends_with(']')) => (h, p),
        _ => (rest, "6443"),
    };
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 || (host.contains(':') && !host.starts_with('[')) {
        return Err(bad());
    }
    Ok(format!("{host}:{port}"))
}

/// What the accept loop, the health checks and the connections share.
struct Shared {
    endpoints: Vec<String>,
    pool: Mutex<Pool>,
    /// Bumped when a server stops being ready: its connections watch it and close.
    closers: Vec<watch::Sender<u64>>,
    /// Per server, in the endpoints' order.
    metrics: Vec<metrics::ServerMetrics>,
}

impl Shared {
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        // The pool holds no invariant a panicking holder could break halfway.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn observe(&self, i: usize, now: Health) {
        let (was, close) = {
            let mut pool = self.pool();
            let was = pool.health(i);
            (was, pool.observe(i, now))
        };
        if let Some(m) = self.metrics.get(i) {
            m.observed(now);
        }
        let endpoint = self.endpoints.get(i).map_or("?", String::as_str);
        if was != Some(now) {
            tracing::info!(%endpoint, ?was, ?now, "API server health changed");
        }
        if close {
            tracing::info!(%endpoint, "closing its connections: another API server is ready");
            if let Some(c) = self.closers.get(i) {
                c.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Why the balancer is not ready (no server is), naming each server's state.
    fn ready(&self) -> Result<(), String> {
        let pool = self.pool();
        if pool.any_ready() {
            return Ok(());
        }
        let states: Vec<String> = self
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{e} {:?}", pool.health(i).unwrap_or(Health::Unknown)))
            .collect();
        Err(format!(
            "no API server is ready ({}); check that they run and answer /readyz",
            states.join(", ")
        ))
    }
}

pub struct LoadBalancer {
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Arc<ClientConfig>,
    interval: Duration,
    registry: Arc<Registry>,
}

impl LoadBalancer {
    /// Listens; nothing is forwarded until `run`.
    pub async fn bind(config: LoadBalancerConfig) -> Result<LoadBalancer, LoadBalancerError> {
        if config.endpoints.is_empty() {
            return Err(LoadBalancerError::NoEndpoints);
        }
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| LoadBalancerError::Listen {
                    addr: config.listen,
                    source,
                })?;
        let tls = crate::any_server_certificate()?.with_no_client_auth();
        let n = config.endpoints.len();
        let start = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish() as usize;
        let mut registry = Registry::default();
        let shared = Shared {
            closers: (0..n).map(|_| watch::channel(0).0).collect(),
            metrics: metrics::register(&mut registry, &config.endpoints),
            endpoints: config.endpoints,
            pool: Mutex::new(Pool::new(n, start)),
        };
        Ok(LoadBalancer {
            listener,
            shared: Arc::new(shared),
            tls: Arc::new(tls),
            interval: config.health_check_interval,
            registry: Arc::new(registry),
        })
    }

    /// What to serve on /healthz, /readyz and /metrics (`crate::Health::serve`): /readyz
    /// answers 200 while at least one API server is ready, else 503 naming each one's state.
    pub fn health_and_metrics(&self) -> (crate::Health, Arc<Registry>) {
        let shared = self.shared.clone();
        let health = crate::Health::default().with_readiness(move || shared.ready());
        (health, self.registry.clone())
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Checks the servers and forwards connections until the future is dropped.
    pub async fn run(self) {
        let mut checks = tokio::task::JoinSet::new();
        for i in 0..self.shared.endpoints.len() {
            checks.spawn(health_checks(
                self.shared.clone(),
                i,
                self.tls.clone(),
                self.interval,
            ));
        }
        loop {
            match self.listener.accept().await {
                Ok((client, _)) => {
                    tokio::spawn(forward(self.shared.clone(), client));
                }
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting a client connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

async fn health_checks(shared: Arc<Shared>, i: usize, tls: Arc<ClientConfig>, every: Duration) {
    let Some(endpoint) = shared.endpoints.get(i).cloned() else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = probe::check(&endpoint, tls.clone(), CONNECT_TIMEOUT).await;
        if let Some(m) = shared.metrics.get(i) {
            m.checked(now);
        }
        shared.observe(i, now);
    }
}

/// Connects the client to the first server that answers, then copies bytes both ways until
/// either side closes or the server stops being ready.
async fn forward(shared: Arc<Shared>, mut client: TcpStream) {
    let candidates = shared.pool().candidates();
    for i in candidates {
        let (Some(endpoint), Some(metrics)) = (shared.endpoints.get(i), shared.metrics.get(i))
        else {
            continue;
        };
        let connect = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(endpoint)).await;
        let mut server = match connect {
            Ok(Ok(server)) => server,
            failed => {
                let error = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "connect timed out".to_string(),
                };
                tracing::warn!(%endpoint, %error, "cannot connect; trying the next API server");
                metrics.connect_failed();
                shared.observe(i, Health::Down);
                continue;
            }
        };
        shared.pool().connected(i);
        let _active = metrics.connected();
        let mut closed = match shared.closers.get(i) {
            Some(c) => c.subscribe(),
            None => return,
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            _ = closed.changed() => {}
        }
        return;
    }
    tracing::warn!(
        endpoints = ?shared.endpoints,
        "no API server accepts connections; closing the client's connection"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_urls_or_addresses() {
        let got = parse_endpoints("https://10.0.0.1:6443, cp2.example:7443,https://cp3/").unwrap();
        assert_eq!(got, ["10.0.0.1:6443", "cp2.example:7443", "cp3:6443"]);
        let v6 = parse_endpoints("https://[fd00::1]:6443,[fd00::2]").unwrap();
        assert_eq!(v6, ["[fd00::1]:6443", "[fd00::2]:6443"]);
    }

    #[test]
    fn bad_endpoints_are_named() {
        for bad in [
            "http://10.0.0.1:6443",
            "10.0.0.1:port",
            "h:0",
            "fd00::1",
            "https://h:6443/api",
        ] {
            let e = parse_endpoints(bad).unwrap_err().to_string();
            assert!(e.contains(bad.trim_end_matches('/')), "{bad}: {e}");
        }
        assert!(matches!(
            parse_endpoints(" , "),
            Err(LoadBalancerError::NoEndpoints)
        ));
    }
}
