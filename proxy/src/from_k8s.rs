//! Pure conversion of Services, EndpointSlices and the Node into the proxy model.
//!
//! Objects are first reduced to small `ServiceInfo` / `SliceInfo` records (what the watches keep
//! in memory: full objects for 10,000 Services would cost tens of MiB), then joined into the model.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::{Endpoint, Protocol, ProxyModel, ServicePort, ServicePortName};

/// Label that ties an EndpointSlice to its Service.
pub use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;

/// Default sessionAffinity ClientIP timeout (3 hours), as in the API.
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

/// One port of a Service spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
    pub node_port: Option<u16>,
}

/// What the proxy needs of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    pub namespace: String,
    pub name: String,
    pub cluster_ip: Ipv4Addr,
    pub ports: Vec<PortSpec>,
    /// externalIPs and LoadBalancer ingress IPs, each reached as kube-proxy's KUBE-EXT chain does.
    pub external_ips: Vec<Ipv4Addr>,
    /// The LoadBalancer ingress IPs alone (what the speaker announces).
    pub load_balancer_ips: Vec<Ipv4Addr>,
    pub affinity_timeout: Option<u32>,
    pub internal_local: bool,
    pub external_local: bool,
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceEndpoint {
    pub ips: Vec<Ipv4Addr>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub node_name: Option<String>,
}

/// What the proxy needs of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceInfo {
    pub namespace: String,
    /// The Service it belongs to (its kubernetes.io/service-name label).
    pub service: String,
    /// (port name, protocol, port number).
    pub ports: Vec<(String, Protocol, u16)>,
    pub endpoints: Vec<SliceEndpoint>,
}

/// The node's IPv4 InternalIP and ExternalIP addresses.
pub fn node_ips(node: &Node) -> Vec<Ipv4Addr> {
    let mut ips: Vec<Ipv4Addr> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|addrs| {
            addrs
                .iter()
                .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
                .filter_map(|a| a.address.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ips.sort();
    ips.dedup();
    ips
}

/// `None` for Services nothing on the node answers for: headless, ExternalName, IPv6-only.
pub fn service_info(svc: &Service) -> Option<ServiceInfo> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    let mut candidates: Vec<&String> = spec.cluster_ips.iter().flatten().collect();
    candidates.extend(spec.cluster_ip.iter());
    // "None" (headless) and IPv6 addresses fail to parse and are skipped.
    let cluster_ip = candidates.into_iter().find_map(|ip| ip.parse().ok())?;
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
    });
    // LoadBalancer ingress IPs take the same path as external IPs (kube-proxy's KUBE-EXT chain).
    let lb_ips = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_ref()?.parse().ok());
    let mut load_balancer_ips: Vec<Ipv4Addr> = lb_ips.collect();
    load_balancer_ips.sort();
    load_balancer_ips.dedup();
    let mut external_ips: Vec<Ipv4Addr> = spec
        .external_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .chain(load_balancer_ips.iter().copied())
        .collect();
    external_ips.sort();
    external_ips.dedup();
    let exposes_node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(PortSpec {
                name: p.name.clone().unwrap_or_default(),
                protocol: Protocol::from_k8s(p.protocol.as_deref())?,
                port: u16::try_from(p.port).ok()?,
                node_port: p
                    .node_port
                    .filter(|_| exposes_node_ports)
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n > 0),
            })
        })
        .collect();
    Some(ServiceInfo {
        namespace: svc.metadata.namespace.clone().unwrap_or_default(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        cluster_ip,
        ports,
        external_ips,
        load_balancer_ips,
        affinity_timeout,
        internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
        external_local: spec.external_traffic_policy.as_deref() == Some("Local"),
    })
}

/// The API server refuses a slice with more endpoints than this (upstream's validation).
pub const MAX_ENDPOINTS_PER_SLICE: usize = 1000;

/// `None` for slices that are not IPv4, belong to no Service, or hold more endpoints than the
/// API allows (such a slice did not come through upstream's validation: none of it is trusted).
pub fn slice_info(slice: &EndpointSlice) -> Option<SliceInfo> {
    if slice.address_type != "IPv4" {
        return None;
    }
    let count = slice.endpoints.as_ref().map_or(0, Vec::len);
    if count > MAX_ENDPOINTS_PER_SLICE {
        warn_limited(format_args!(
            "EndpointSlice {}/{} has {count} endpoints (the API allows {MAX_ENDPOINTS_PER_SLICE}); ignored",
            slice.metadata.namespace.as_deref().unwrap_or(""),
            slice.metadata.name.as_deref().unwrap_or(""),
        ));
        return None;
    }
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SERVICE_NAME_LABEL))?
        .clone();
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p.name.clone().unwrap_or_default(),
                Protocol::from_k8s(p.protocol.as_deref())?,
                u16::try_from(p.port?).ok()?,
            ))
        })
        .collect();
    let endpoints = slice
        .endpoints
        .iter()
        .flatten()
        .map(|ep| {
            let cond = ep.conditions.clone().unwrap_or_default();
            // The API says an unset ready or serving condition means "true" (and kube-proxy
            // reads them so), an unset terminating one "false".
            let ready = cond.ready.unwrap_or(true);
            SliceEndpoint {
                ips: ep
                    .addresses
                    .iter()
                    .filter_map(|a| a.parse().ok())
                    .filter(|ip| routable(*ip, slice))
                    .collect(),
                ready,
                serving: cond.serving.unwrap_or(true),
                terminating: cond.terminating.unwrap_or(false),
                node_name: ep.node_name.clone(),
            }
        })
        .collect();
    Some(SliceInfo {
        namespace: slice.metadata.namespace.clone().unwrap_or_default(),
        service,
        ports,
        endpoints,
    })
}

/// False for addresses no pod has and kube-proxy never programs: loopback (the node itself),
/// link-local (169.254.169.254 is the cloud metadata service), unspecified, multicast and
/// broadcast. A rule to one of them would hand the node's own services to any client.
pub fn is_endpoint_address(ip: Ipv4Addr) -> bool {
    !(ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast())
}

fn routable(ip: Ipv4Addr, slice: &EndpointSlice) -> bool {
    let ok = is_endpoint_address(ip);
    if !ok {
        warn_limited(format_args!(
            "EndpointSlice {}/{}: endpoint address {ip} is not a pod address; skipped",
            slice.metadata.namespace.as_deref().unwrap_or(""),
            slice.metadata.name.as_deref().unwrap_or(""),
        ));
    }
    ok
}

/// Seconds between warnings about hostile slices: a slice rewritten in a loop must not flood
/// the log; the first warning of each period names one example.
const WARN_PERIOD_SECS: u64 = 60;
static LAST_WARN: AtomicU64 = AtomicU64::new(0);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

fn warn_limited(message: std::fmt::Arguments<'_>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST_WARN.load(Ordering::Relaxed);
    let due = last == 0 || now.saturating_sub(last) >= WARN_PERIOD_SECS;
    if due
        && LAST_WARN
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let suppressed = SUPPRESSED.swap(0, Ordering::Relaxed);
        tracing::warn!(suppressed, "{message}");
    } else {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Builds the model from whole objects (tests and tools; the proxy keeps only the infos).
pub fn build_model(
    node_name: &str,
    node: Option<&Node>,
    services: &[&Service],
    slices: &[&EndpointSlice],
) -> ProxyModel {
    let services: Vec<ServiceInfo> = services.iter().filter_map(|s| service_info(s)).collect();
    let slices: Vec<SliceInfo> = slices.iter().filter_map(|s| slice_info(s)).collect();
    build_model_from_infos(
        node_name,
        node.map(node_ips).unwrap_or_default(),
        services.iter(),
        slices.iter(),
    )
}

/// Joins Services with their slices into the model.
pub fn build_model_from_infos<'a>(
    node_name: &str,
    node_ips: Vec<Ipv4Addr>,
    services: impl Iterator<Item = &'a ServiceInfo>,
    slices: impl Iterator<Item = &'a SliceInfo>,
) -> ProxyModel {
    let mut by_service: BTreeMap<(&str, &str), Vec<&SliceInfo>> = BTreeMap::new();
    for s in slices {
        by_service
            .entry((s.namespace.as_str(), s.service.as_str()))
            .or_default()
            .push(s);
    }
    let mut model = ProxyModel {
        node_name: node_name.to_string(),
        node_ips,
        services: BTreeMap::new(),
    };
    for svc in services {
        let svc_slices = by_service
            .get(&(svc.namespace.as_str(), svc.name.as_str()))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for p in &svc.ports {
            let name = ServicePortName {
                namespace: svc.namespace.clone(),
                name: svc.name.clone(),
                port_name: p.name.clone(),
                protocol: p.protocol,
            };
            let port = ServicePort {
                name: name.clone(),
                cluster_ip: svc.cluster_ip,
                port: p.port,
                node_port: p.node_port,
                external_ips: svc.external_ips.clone(),
                affinity_timeout: svc.affinity_timeout,
                internal_local: svc.internal_local,
                external_local: svc.external_local,
                endpoints: endpoints_for_port(&p.name, p.protocol, node_name, svc_slices),
            };
            model.services.insert(name, port);
        }
    }
    model
}

/// Endpoints of one Service port. The port number comes from the slice's port with the same name,
/// which is how a named targetPort resolves per pod.
fn endpoints_for_port(
    port_name: &str,
    protocol: Protocol,
    node_name: &str,
    slices: &[&SliceInfo],
) -> Vec<Endpoint> {
    let mut by_addr: BTreeMap<(Ipv4Addr, u16), Endpoint> = BTreeMap::new();
    for slice in slices {
        let Some(port) = slice
            .ports
            .iter()
            .find(|(name, proto, _)| name == port_name && *proto == protocol)
            .map(|(_, _, port)| *port)
        else {
            continue;
        };
        for ep in &slice.endpoints {
            let local = ep.node_name.as_deref() == Some(node_name);
            for ip in &ep.ips {
                let candidate = Endpoint {
                    ip: *ip,
                    port,
                    ready: ep.ready,
                    serving: ep.serving,
                    terminating: ep.terminating,
                    local,
                };
                // During slice moves an address can appear twice; keep the more usable copy.
                by_addr
                    .entry((*ip, port))
                    .and_modify(|old| {
                        if !old.ready && candidate.ready {
                            *old = candidate.clone();
                        }
                    })
                    .or_insert(candidate);
            }
        }
    }
    by_addr.into_values().collect()
}
