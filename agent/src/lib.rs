//! Keelson's node agent: a kubelet that drives containerd over CRI.
//!
//! Pure logic (pod state machine, back-off, status, spec to CRI translation, log rendering) is
//! separated from I/O (CRI behind the [`cri::Cri`] trait, the API through kube-rs).

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod agent;
pub mod backoff;
pub mod bootstrap;
pub mod certificate;
pub mod cgroups;
pub mod conditions;
pub mod config;
pub mod cri;
#[cfg(test)]
pub mod cri_fake;
pub mod error;
pub mod eviction;
pub mod gc;
pub mod metrics;
pub mod node;
pub mod paths;
pub mod pod;
pub use keelson_apimachinery::quantity;
pub mod server;
pub mod shutdown;
pub mod stats;

pub use agent::run;
pub use config::AgentConfig;
pub use error::AgentError;
