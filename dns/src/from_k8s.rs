//! Services and EndpointSlices to the zone's compact records (pure).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;

use crate::zone::{EndpointEntry, PortEntry, ServiceEntry, ServiceKind, SliceEntry};

pub fn service_entry(svc: &Service) -> Option<ServiceEntry> {
    let spec = svc.spec.as_ref()?;
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        ServiceKind::ExternalName(spec.external_name.clone()?)
    } else if spec.cluster_ip.as_deref() == Some("None") {
        ServiceKind::Headless
    } else {
        let mut ips: Vec<IpAddr> = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|ip| ip.parse().ok())
            .collect();
        ips.dedup();
        ServiceKind::ClusterIp(ips)
    };
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port_entry(p.name.as_deref(), p.protocol.as_deref(), Some(p.port)))
        .collect();
    Some(ServiceEntry {
        namespace: svc.metadata.namespace.clone()?,
        name: svc.metadata.name.clone()?,
        kind,
        ports,
        publish_not_ready: spec.publish_not_ready_addresses == Some(true),
    })
}

fn port_entry(name: Option<&str>, protocol: Option<&str>, port: Option<i32>) -> Option<PortEntry> {
    Some(PortEntry {
        name: name.unwrap_or_default().to_ascii_lowercase(),
        protocol: protocol.unwrap_or("TCP").to_ascii_lowercase(),
        port: u16::try_from(port?).ok()?,
    })
}

/// A slice's addresses with its ports; FQDN slices and slices without the service-name label
/// name no address of a Service.
pub fn slice_entry(slice: &EndpointSlice) -> Option<SliceEntry> {
    if slice.address_type == "FQDN" {
        return None;
    }
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)?
        .clone();
    let ports: Vec<PortEntry> = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port_entry(p.name.as_deref(), p.protocol.as_deref(), p.port))
        .collect();
    let mut endpoints = Vec::new();
    for ep in slice.endpoints.iter().flatten() {
        // Upstream: an unknown (nil) ready condition is to be taken as ready.
        let ready = ep.conditions.as_ref().and_then(|c| c.ready) != Some(false);
        for addr in &ep.addresses {
            let Ok(ip) = addr.parse::<IpAddr>() else {
                continue;
            };
            endpoints.push(EndpointEntry {
                ip,
                hostname: ep.hostname.clone(),
                ready,
                ports: ports.clone(),
            });
        }
    }
    Some(SliceEntry {
        namespace: slice.metadata.namespace.clone()?,
        service,
        endpoints,
    })
}
