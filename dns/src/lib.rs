//! keelson-dns: cluster DNS answering from its own watch of Services and EndpointSlices, as
//! the Kubernetes DNS specification (and CoreDNS's kubernetes plugin) define the names.

pub mod from_k8s;
pub mod reverse;
pub mod wire;
pub mod zone;
