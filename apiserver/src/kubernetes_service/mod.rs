//! The `kubernetes` Service in `default` and its Endpoints and EndpointSlice, as upstream's API
//! server keeps them: the first address of the service range, port 443 named https, pointing
//! at every API server whose identity Lease is fresh (`identity.rs`), so in-cluster clients
//! find the API servers and several servers agree on what the endpoints list.

pub mod identity;

use crate::http::App;
use crate::object::set_path;
use crate::resources;
use crate::rest::{self, Api, Sub, Target};
use crate::status::ApiResult;
use identity::Identity;
use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";

/// What the three objects point at.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The first address of --service-cluster-ip-range.
    pub cluster_ip: std::net::Ipv4Addr,
    /// Where clients reach this server: the advertised address and the port served.
    pub address: IpAddr,
    pub port: u16,
}

impl Endpoint {
    fn socket(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }
}

/// At start: this server's lease, then the three objects.
pub async fn start(api: &Api, at: &Endpoint, id: &Identity) {
    // Pods cannot reach a loopback address (and validation refuses it as an endpoint, as
    // upstream's): this server is then in no endpoints.
    if at.address.is_loopback() {
        tracing::info!(address = %at.address, "this server is in no endpoints of the kubernetes Service: the advertised address is loopback (set --advertise-address for in-cluster clients)");
    }
    step(api, at, id).await;
}

/// Renews the lease, then points the endpoints at the fresh servers.
async fn step(api: &Api, at: &Endpoint, id: &Identity) {
    if let Err(e) = identity::renew(api, id, at.socket()).await {
        tracing::warn!(lease = id.lease, error = %e.message, "renewing the identity lease failed");
    }
    let seen = identity::seen(api);
    let now = chrono::Utc::now();
    reconcile(api, at, &identity::fresh(&seen, now)).await;
    identity::collect_garbage(api, &identity::stale(&seen, now)).await;
}

/// `step` every identity::RENEW for the server's lifetime.
pub async fn keep(app: Arc<App>, at: Endpoint, id: Identity) {
    let first = tokio::time::Instant::now() + identity::RENEW;
    let mut tick = tokio::time::interval_at(first, identity::RENEW);
    loop {
        tick.tick().await;
        step(&app.api, &at, &id).await;
    }
}

/// At clean shutdown: the lease goes, and the endpoints list the servers left.
pub async fn leave(api: &Api, at: &Endpoint, id: &Identity) {
    identity::release(api, id).await;
    let mut servers = identity::fresh(&identity::seen(api), chrono::Utc::now());
    servers.retain(|s| *s != at.socket());
    reconcile(api, at, &servers).await;
}

/// Creates the three objects, or brings them back to what they should be, with `servers` as
/// the endpoints. Failures are logged: the server still serves, only in-cluster clients are
/// left without the Service.
pub async fn reconcile(api: &Api, at: &Endpoint, servers: &[SocketAddr]) {
    let routable: Vec<SocketAddr> = servers
        .iter()
        .filter(|s| !s.ip().is_loopback())
        .copied()
        .collect();
    // No endpoints objects are made for nothing; ones that exist are emptied.
    let make = !routable.is_empty();
    let kinds = [
        ("", "services", service(at), true),
        ("", "endpoints", endpoints(&routable), make),
        (
            "discovery.k8s.io",
            "endpointslices",
            endpoint_slice(&routable),
            make,
        ),
    ];
    for (group, plural, want, create) in kinds {
        let Some(res) = resources::lookup(group, "v1", plural) else {
            continue;
        };
        if let Err(e) = put(api, res, want, create).await {
            tracing::warn!(resource = plural, error = %e.message, "reconciling default/kubernetes failed");
        }
    }
}

/// Creates `want` (when `create`), or copies its fields (other than a Service's allocated
/// spec) over the stored object when they differ.
async fn put(
    api: &Api,
    res: &'static resources::Resource,
    want: Value,
    create: bool,
) -> ApiResult<()> {
    let target = Target {
        res,
        namespace: NAMESPACE.into(),
        name: NAME.into(),
    };
    let Some(current) = api.store.get(&target.key()) else {
        if !create {
            return Ok(());
        }
        return rest::create(api, res, NAMESPACE, want, false)
            .await
            .map(drop);
    };
    let mut obj = (*current.obj).clone();
    let fields: &[&str] = match res.kind {
        "Service" => &["ports"],
        "Endpoints" => &["subsets"],
        _ => &["addressType", "endpoints", "ports"],
    };
    for f in fields {
        let (path, value) = match res.kind {
            "Service" => (vec!["spec", *f], want.pointer(&format!("/spec/{f}"))),
            _ => (vec![*f], want.get(*f)),
        };
        set_path(&mut obj, &path, value.cloned().unwrap_or(Value::Null));
    }
    if let Some(labels) = want.pointer("/metadata/labels") {
        set_path(&mut obj, &["metadata", "labels"], labels.clone());
    }
    if obj == *current.obj {
        return Ok(());
    }
    rest::update(api, &target, obj, Sub::Main, false)
        .await
        .map(drop)
}

fn service(at: &Endpoint) -> Value {
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { "component": "apiserver", "provider": "kubernetes" } },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": at.cluster_ip.to_string(),
            "clusterIPs": [at.cluster_ip.to_string()],
            "sessionAffinity": "None",
            "ports": [{ "name": "https", "port": 443, "protocol": "TCP", "targetPort": at.port }],
        },
    })
}

/// The servers by port, ports ascending, addresses sorted: every server writes the same.
fn by_port(servers: &[SocketAddr]) -> BTreeMap<u16, Vec<String>> {
    let mut ports: BTreeMap<u16, Vec<IpAddr>> = BTreeMap::new();
    for s in servers {
        ports.entry(s.port()).or_default().push(s.ip());
    }
    ports
        .into_iter()
        .map(|(p, mut ips)| {
            ips.sort();
            ips.dedup();
            (p, ips.iter().map(IpAddr::to_string).collect())
        })
        .collect()
}

/// One subset per port: servers of one cluster serve on one port (as upstream assumes), so
/// normally one subset with every server.
fn endpoints(servers: &[SocketAddr]) -> Value {
    let subsets: Vec<Value> = by_port(servers)
        .into_iter()
        .map(|(port, ips)| {
            let addresses: Vec<Value> = ips.iter().map(|ip| json!({ "ip": ip })).collect();
            json!({
                "addresses": addresses,
                "ports": [{ "name": "https", "port": port, "protocol": "TCP" }],
            })
        })
        .collect();
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { "endpointslice.kubernetes.io/skip-mirror": "true" } },
        "subsets": subsets,
    })
}

/// The slice holds one port: the servers on the lowest port (all of them, normally).
fn endpoint_slice(servers: &[SocketAddr]) -> Value {
    let first = by_port(servers).into_iter().next();
    let (port, ips) = first.unwrap_or((443, Vec::new()));
    let family = match ips.first().is_some_and(|ip| ip.contains(':')) {
        true => "IPv6",
        false => "IPv4",
    };
    let endpoints: Vec<Value> = ips
        .iter()
        .filter(|ip| ip.contains(':') == (family == "IPv6"))
        .map(|ip| json!({ "addresses": [ip], "conditions": { "ready": true } }))
        .collect();
    json!({
        "metadata": { "name": NAME, "namespace": NAMESPACE,
            "labels": { SERVICE_NAME_LABEL: NAME } },
        "addressType": family,
        "endpoints": endpoints,
        "ports": [{ "name": "https", "port": port, "protocol": "TCP" }],
    })
}

#[cfg(test)]
mod tests;
