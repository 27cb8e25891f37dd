//! The objects the controller watches, and how an Ingress is named in them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};

/// The objects the controller watches, as the informers' stores hold them.
#[derive(Default)]
pub struct Inputs {
    pub ingresses: Vec<Arc<Ingress>>,
    pub classes: Vec<Arc<IngressClass>>,
    pub services: Vec<Arc<Service>>,
    pub slices: Vec<Arc<EndpointSlice>>,
    /// Only kubernetes.io/tls Secrets named by a handled Ingress's spec.tls are used.
    pub secrets: Vec<Arc<Secret>>,
}

/// An Ingress's namespace and name.
pub fn key(ing: &Ingress) -> (String, String) {
    let m = &ing.metadata;
    (
        m.namespace.clone().unwrap_or_else(|| "default".into()),
        m.name.clone().unwrap_or_default(),
    )
}
