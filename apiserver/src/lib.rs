//! Keelson's Kubernetes-compatible API server: REST and watch over an embedded store.

// No panic reachable from a request: it drops the connection and can leave undeletable objects.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod allocators;
pub mod audit;
pub mod auth;
pub mod certs;
pub mod cluster_info;
pub mod http;
pub mod kubeconfig;
pub mod kubernetes_service;
pub mod metrics;
pub mod migrate;
pub mod negotiate;
pub mod object;
pub mod openapi;
pub mod options;
pub mod render;
pub mod rest;
pub mod serve;
pub mod server;
pub mod status;
pub mod store;

/// The kinds served and their scope: one table, shared with the per-kind rules.
pub use keelson_apiserver_registry::resources;

pub use options::Options;
pub use server::{run, ServerError};
