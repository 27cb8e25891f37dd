//! keelson-dns: cluster DNS answering from its own watch of Services and EndpointSlices, as
//! the Kubernetes DNS specification (and CoreDNS's kubernetes plugin) define the names.

pub mod app;
pub mod error;
pub mod forward;
pub mod from_k8s;
pub mod listen;
pub mod metrics;
pub mod reverse;
pub mod server;
pub mod wire;
pub mod zone;
