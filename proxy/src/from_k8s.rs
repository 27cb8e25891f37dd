//! Pure conversion of Services, EndpointSlices and the Node into the proxy model.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::{Endpoint, Protocol, ProxyModel, ServicePort, ServicePortName};

/// Label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Default sessionAffinity ClientIP timeout (3 hours), as in the API.
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10800;

/// Builds the model. Services without a usable IPv4 cluster IP (headless, ExternalName,
/// IPv6-only) are skipped: nothing on the node has to answer for them.
pub fn build_model(
    node_name: &str,
    node: Option<&Node>,
    services: &[&Service],
    slices: &[&EndpointSlice],
) -> ProxyModel {
    let slices_by_service = group_slices(slices);
    let mut model = ProxyModel {
        node_name: node_name.to_string(),
        node_ips: node.map(node_ips).unwrap_or_default(),
        services: BTreeMap::new(),
    };
    for svc in services {
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let name = svc.metadata.name.clone().unwrap_or_default();
        let empty = Vec::new();
        let svc_slices = slices_by_service
            .get(&(ns.clone(), name.clone()))
            .unwrap_or(&empty);
        for port in service_ports(svc, node_name, svc_slices) {
            model.services.insert(port.name.clone(), port);
        }
    }
    model
}

fn group_slices<'a>(
    slices: &[&'a EndpointSlice],
) -> BTreeMap<(String, String), Vec<&'a EndpointSlice>> {
    let mut out: BTreeMap<(String, String), Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        let Some(svc) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let ns = slice.metadata.namespace.clone().unwrap_or_default();
        out.entry((ns, svc.clone())).or_default().push(slice);
    }
    out
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

fn cluster_ipv4(svc: &Service) -> Option<Ipv4Addr> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    let mut candidates: Vec<&String> = spec.cluster_ips.iter().flatten().collect();
    candidates.extend(spec.cluster_ip.iter());
    // "None" (headless) and IPv6 addresses fail to parse and are skipped.
    candidates.into_iter().find_map(|ip| ip.parse().ok())
}

fn service_ports(svc: &Service, node_name: &str, slices: &[&EndpointSlice]) -> Vec<ServicePort> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let Some(cluster_ip) = cluster_ipv4(svc) else {
        return Vec::new();
    };
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let name = svc.metadata.name.clone().unwrap_or_default();
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT)
    });
    let mut external_ips: Vec<Ipv4Addr> = spec
        .external_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    external_ips.sort();
    external_ips.dedup();
    let exposes_node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));

    let mut out = Vec::new();
    for p in spec.ports.iter().flatten() {
        let (Some(protocol), Ok(port)) = (
            Protocol::from_k8s(p.protocol.as_deref()),
            u16::try_from(p.port),
        ) else {
            continue;
        };
        let port_name = p.name.clone().unwrap_or_default();
        let node_port = if exposes_node_ports {
            p.node_port
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n > 0)
        } else {
            None
        };
        out.push(ServicePort {
            name: ServicePortName {
                namespace: namespace.clone(),
                name: name.clone(),
                port_name: port_name.clone(),
                protocol,
            },
            cluster_ip,
            port,
            node_port,
            external_ips: external_ips.clone(),
            affinity_timeout,
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            external_local: spec.external_traffic_policy.as_deref() == Some("Local"),
            endpoints: endpoints_for_port(&port_name, protocol, node_name, slices),
        });
    }
    out
}

/// Endpoints of one Service port. The port number comes from the slice's port with the same name,
/// which is how a named targetPort resolves per pod.
fn endpoints_for_port(
    port_name: &str,
    protocol: Protocol,
    node_name: &str,
    slices: &[&EndpointSlice],
) -> Vec<Endpoint> {
    let mut by_addr: BTreeMap<(Ipv4Addr, u16), Endpoint> = BTreeMap::new();
    for slice in slices {
        let Some(port) = slice.ports.iter().flatten().find_map(|sp| {
            let same_name = sp.name.as_deref().unwrap_or("") == port_name;
            let same_proto = Protocol::from_k8s(sp.protocol.as_deref()) == Some(protocol);
            (same_name && same_proto)
                .then_some(sp.port)
                .flatten()
                .and_then(|p| u16::try_from(p).ok())
        }) else {
            continue;
        };
        for ep in slice.endpoints.iter().flatten() {
            let cond = ep.conditions.clone().unwrap_or_default();
            // The API says an unset ready/serving condition means "true".
            let ready = cond.ready.unwrap_or(true);
            let serving = cond.serving.unwrap_or(ready);
            let terminating = cond.terminating.unwrap_or(false);
            let local = ep.node_name.as_deref() == Some(node_name);
            for addr in &ep.addresses {
                let Ok(ip) = addr.parse::<Ipv4Addr>() else {
                    continue;
                };
                let candidate = Endpoint {
                    ip,
                    port,
                    ready,
                    serving,
                    terminating,
                    local,
                };
                // During slice moves an address can appear twice; keep the more usable copy.
                by_addr
                    .entry((ip, port))
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
