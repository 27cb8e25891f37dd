//! keelson-proxy: Services and EndpointSlices to kernel NAT rules (iptables or nftables).
//!
//! Inputs (Kubernetes objects) become a [`model::ProxyModel`] through pure functions; backends
//! render the model into rule text through pure functions and load it in one transaction.

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod announce;
pub mod app;
pub mod backend;
pub mod cidr;
pub mod conntrack;
pub mod error;
pub mod exec;
pub mod from_k8s;
pub mod hash;
pub mod inputs;
pub mod iptables;
pub mod metrics;
pub mod model;
pub mod nftables;
pub mod proxier;
pub mod sync_loop;

pub use error::ProxyError;
