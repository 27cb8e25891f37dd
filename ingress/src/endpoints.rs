//! Backends: an Ingress's Service backend -> the Service port -> ready pod addresses from the
//! Service's EndpointSlices (pod IPs directly, not the ClusterIP). Pure.
//!
//! Which endpoints take requests follows ingress-nginx: `ready` true or unset, and never one that
//! is `terminating` (even while still `serving`), so a pod going away gets no new request from
//! the next reload on; an address listed by several slices is used once.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::{EndpointConditions, EndpointSlice};
use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend};

use crate::inputs::Inputs;
use keelson_apimachinery::well_known::SERVICE_NAME_LABEL;

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An upstream (by name) with at least one ready endpoint.
    Upstream(String),
    /// The backend exists in the Ingress but has no ready endpoint (or no such Service): 503.
    Unavailable,
    /// Nothing matches: 404.
    NotFound,
}

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
                if !takes_requests(ep.conditions.as_ref()) {
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

/// Whether new requests may go to an endpoint with these conditions. An unknown `ready` counts
/// as ready, as the API documents. `terminating` drops it whatever `ready` says: a controller
/// that leaves `ready` unset or true on a terminating pod must not keep it in nginx until the pod
/// is gone. `serving` (a terminating pod still answering) is for kube-proxy's fallback when no
/// endpoint is left; ingress-nginx sends no new request there, and neither does this.
pub fn takes_requests(conditions: Option<&EndpointConditions>) -> bool {
    let Some(c) = conditions else {
        return true;
    };
    c.ready != Some(false) && c.terminating != Some(true)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(
        ready: Option<bool>,
        serving: Option<bool>,
        terminating: Option<bool>,
    ) -> Option<EndpointConditions> {
        Some(EndpointConditions {
            ready,
            serving,
            terminating,
        })
    }

    #[test]
    fn ready_or_unknown_endpoints_take_requests() {
        assert!(takes_requests(None));
        assert!(takes_requests(conditions(None, None, None).as_ref()));
        assert!(takes_requests(conditions(Some(true), None, None).as_ref()));
        let settled = conditions(Some(true), Some(true), Some(false));
        assert!(takes_requests(settled.as_ref()));
        // Not ready (a failing readiness probe) and not terminating: out until ready again.
        assert!(!takes_requests(
            conditions(Some(false), None, None).as_ref()
        ));
        let unready = conditions(Some(false), Some(false), Some(false));
        assert!(!takes_requests(unready.as_ref()));
    }

    #[test]
    fn terminating_endpoints_never_take_new_requests() {
        // What the endpointslice controller writes for a pod with a deletionTimestamp that
        // still passes its readiness probe: serving, but going away.
        let draining = conditions(Some(false), Some(true), Some(true));
        assert!(!takes_requests(draining.as_ref()));
        assert!(!takes_requests(
            conditions(Some(false), Some(false), Some(true)).as_ref()
        ));
        // Dropped even when `ready` was left unset or true.
        assert!(!takes_requests(
            conditions(None, Some(true), Some(true)).as_ref()
        ));
        assert!(!takes_requests(conditions(None, None, Some(true)).as_ref()));
        assert!(!takes_requests(
            conditions(Some(true), Some(true), Some(true)).as_ref()
        ));
    }
}
