//! Backends: an Ingress's Service backend -> the Service port -> ready pod addresses from the
//! Service's EndpointSlices (pod IPs directly, not the ClusterIP). Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend};

use crate::model::{Inputs, Target, SERVICE_NAME_LABEL};

/// Service backend -> ready pod addresses, through the Service's ports and its EndpointSlices.
pub(crate) struct Resolver<'a> {
    services: BTreeMap<(&'a str, &'a str), &'a Service>,
    slices: &'a [Arc<EndpointSlice>],
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(inputs: &'a Inputs) -> Self {
        let services = inputs
            .services
            .iter()
            .filter_map(|s| {
                let m = &s.metadata;
                Some(((m.namespace.as_deref()?, m.name.as_deref()?), s.as_ref()))
            })
            .collect();
        Resolver {
            services,
            slices: &inputs.slices,
        }
    }

    pub(crate) fn target(
        &self,
        ns: &str,
        backend: &IngressBackend,
        upstreams: &mut BTreeMap<String, Vec<SocketAddr>>,
    ) -> Target {
        // Resource backends (spec.backend.resource) name no Service; nothing to proxy to.
        let Some(svc) = &backend.service else {
            return Target::Unavailable;
        };
        let name = upstream_name(ns, svc);
        let endpoints = self.endpoints(ns, svc);
        if endpoints.is_empty() {
            return Target::Unavailable;
        }
        upstreams.insert(name.clone(), endpoints);
        Target::Upstream(name)
    }

    fn endpoints(&self, ns: &str, backend: &IngressServiceBackend) -> Vec<SocketAddr> {
        let Some(service) = self.services.get(&(ns, backend.name.as_str())) else {
            return Vec::new();
        };
        let Some(port) = service_port(service, backend) else {
            return Vec::new();
        };
        let port_name = port.name.as_deref().unwrap_or("");
        let mut out = BTreeSet::new();
        for slice in self.slices.iter().filter(|s| belongs(s, ns, &backend.name)) {
            if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
                continue;
            }
            let number =
                slice.ports.iter().flatten().find_map(|p| {
                    (p.name.as_deref().unwrap_or("") == port_name).then_some(p.port?)
                });
            let Some(number) = number.and_then(|n| u16::try_from(n).ok()) else {
                continue;
            };
            for ep in slice.endpoints.iter().flatten() {
                // An unknown condition counts as ready, as the API documents.
                if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                    continue;
                }
                for a in &ep.addresses {
                    if let Ok(ip) = a.parse::<IpAddr>() {
                        out.insert(SocketAddr::new(ip, number));
                    }
                }
            }
        }
        out.into_iter().collect()
    }
}

fn service_port<'s>(
    service: &'s Service,
    backend: &IngressServiceBackend,
) -> Option<&'s ServicePort> {
    let wanted = backend.port.as_ref()?;
    let ports = service.spec.as_ref()?.ports.as_ref()?;
    ports.iter().find(|p| match (&wanted.name, wanted.number) {
        (Some(name), _) if !name.is_empty() => p.name.as_deref() == Some(name.as_str()),
        (_, Some(number)) => p.port == number,
        _ => false,
    })
}

fn belongs(slice: &EndpointSlice, ns: &str, service: &str) -> bool {
    slice.metadata.namespace.as_deref() == Some(ns)
        && slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .map(String::as_str)
            == Some(service)
}

fn upstream_name(ns: &str, svc: &IngressServiceBackend) -> String {
    let port = svc.port.as_ref().map_or_else(String::new, |p| {
        p.name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| p.number.unwrap_or(0).to_string())
    });
    // Only name characters reach nginx.conf, whatever the API server let through.
    format!("{ns}_{}_{port}", svc.name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}
