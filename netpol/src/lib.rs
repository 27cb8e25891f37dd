//! keelson-netpol: networking.k8s.io/v1 NetworkPolicy enforced on the node.
//!
//! Policies, pods and namespaces become a [`ruleset::Ruleset`] (sets of pod IPs, one chain per
//! policy and direction) through pure functions ([`compile`]); [`ruleset`] renders it, or the
//! difference from the last one loaded, as one `nft -f` transaction; [`app`] watches the API and
//! runs the loop.

// No panic reachable from input: a panic here leaves a node's pods with stale policy.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod app;
pub mod compile;
pub mod from_k8s;
pub mod metrics;
pub mod nft;
pub mod ranges;
pub mod ruleset;
