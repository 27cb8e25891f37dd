//! What every Keelson daemon that is an API client shares (controller manager, scheduler,
//! ingress, proxy, agent): the client from a kubeconfig, logging, signal handling, the
//! /healthz + /readyz + /metrics endpoint, the "stores changed -> debounced sync" loop, the
//! hardened accept loop of the HTTPS servers (API server, agent), and the TLS client that takes
//! any server certificate (the agent's probes, the API server's connections to agents), and the
//! client-side load balancer in front of several API servers (`lb`).

pub mod cgroupfs;
pub mod client;
pub mod connections;
pub mod events;
pub mod health;
pub mod hostname;
pub mod http_get;
pub mod informer;
pub mod lb;
pub mod leader;
pub mod logging;
pub mod not_found;
pub mod signals;
pub mod sync;
pub mod tls_insecure;
pub mod x509;

pub use client::{client, ClientError};
pub use connections::{serve_connections, Connections, PeerCertificate, RemoteAddr};
pub use health::{counter, ready_now, serve_health_and_metrics, Health, HealthError};
pub use hostname::{node_name, NodeFlags};
pub use informer::{inform, namespaced_name, Change, Informer, Objects};
pub use logging::init_logging;
pub use not_found::{get_opt, is_not_found};
pub use signals::{shutdown_signal, Shutdown};
pub use sync::{reflect, Changes, SyncLoop};
pub use tls_insecure::any_server_certificate;
pub use x509::{subject_identity, SubjectIdentity};
