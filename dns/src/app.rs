//! Wiring: watches of Services and EndpointSlices -> a zone rebuilt after each change (debounced)
//! -> the UDP and TCP servers; /healthz, /readyz and /metrics beside them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_daemon::{Changes, Health, Objects, Shutdown, SyncLoop};
use kube::runtime::watcher;
use kube::Api;

use crate::error::DnsError;
use crate::from_k8s;
use crate::metrics::Metrics;
use crate::server::{self, Server, ZoneCell};
use crate::zone::Zone;

#[derive(Clone, Debug)]
pub struct Options {
    pub kubeconfig: Option<PathBuf>,
    pub cluster_domain: String,
    /// UDP and TCP.
    pub listen: SocketAddr,
    /// /healthz, /readyz and /metrics.
    pub health: SocketAddr,
    /// Where names outside the cluster's zones go, in order (none: refused).
    pub upstreams: Vec<SocketAddr>,
    /// The longest a forwarded answer is cached, in seconds (0: none).
    pub cache_max_ttl: u32,
    /// Records' TTL and the SOA's negative-caching TTL.
    pub ttl: u32,
}

/// Runs until SIGTERM or SIGINT.
pub async fn run(opts: Options) -> Result<(), DnsError> {
    let client = keelson_daemon::client(opts.kubeconfig.as_deref()).await?;
    let shutdown = Shutdown::on_signal();
    let udp = crate::listen::udp(opts.listen)
        .map_err(|source| listen_error(opts.listen, "udp", source))?;
    let tcp = crate::listen::tcp(opts.listen)
        .map_err(|source| listen_error(opts.listen, "tcp", source))?;

    let metrics = Metrics::new();
    let health = Health::default();
    tokio::spawn(keelson_daemon::serve_health_and_metrics(
        opts.health,
        metrics.registry(),
        health.clone(),
    ));

    let zone: ZoneCell = Arc::new(RwLock::new(None));
    let srv = Arc::new(Server {
        zone: zone.clone(),
        ttl: opts.ttl,
        forward: crate::forward::Forwarder::new(
            opts.upstreams.clone(),
            opts.cache_max_ttl,
            metrics.clone(),
        ),
        metrics: metrics.clone(),
    });
    let udp_task = tokio::spawn(server::serve_udp(srv.clone(), udp));
    let tcp_task = tokio::spawn(server::serve_tcp(srv, tcp));
    tracing::info!(listen = %opts.listen, domain = %opts.cluster_domain, upstreams = ?opts.upstreams, "keelson-dns serving");

    let changes = Changes::default();
    let services: Objects<Service> = keelson_daemon::reflect(
        Api::all(client.clone()),
        watcher::Config::default(),
        &changes,
    );
    let slices: Objects<EndpointSlice> =
        keelson_daemon::reflect(Api::all(client), watcher::Config::default(), &changes);
    tokio::select! {
        _ = futures::future::join(services.synced(), slices.synced()) => {}
        _ = shutdown.requested() => return Ok(()),
    }
    let lp = SyncLoop {
        debounce: Duration::from_millis(50),
        resync: Duration::from_secs(60),
    };
    let mut serial = 0u32;
    lp.run(&changes, &shutdown, || {
        serial = next_serial(serial);
        let z = build_zone(&opts.cluster_domain, &services, &slices, serial);
        metrics
            .services
            .set(i64::try_from(z.service_count()).unwrap_or(i64::MAX));
        match zone.write() {
            Ok(mut w) => *w = Some(Arc::new(z)),
            Err(p) => *p.into_inner() = Some(Arc::new(z)),
        }
        health.set_ready(true);
        futures::future::ready(())
    })
    .await;
    udp_task.abort();
    tcp_task.abort();
    tracing::info!("keelson-dns stopped");
    Ok(())
}

fn listen_error(addr: SocketAddr, proto: &'static str, source: std::io::Error) -> DnsError {
    DnsError::Listen {
        addr,
        proto,
        source,
    }
}

fn build_zone(
    domain: &str,
    services: &Objects<Service>,
    slices: &Objects<EndpointSlice>,
    serial: u32,
) -> Zone {
    let services = services
        .state()
        .iter()
        .filter_map(|s| from_k8s::service_entry(s))
        .collect();
    let slices = slices
        .state()
        .iter()
        .filter_map(|s| from_k8s::slice_entry(s))
        .collect();
    Zone::build(domain, services, slices, serial)
}

/// The SOA serial: the rebuild's Unix time (as CoreDNS's last-change time), always increasing.
fn next_serial(previous: u32) -> u32 {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or(0);
    now.max(previous.saturating_add(1))
}
