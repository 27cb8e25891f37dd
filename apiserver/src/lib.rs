//! Keelson's Kubernetes-compatible API server: REST and watch over an embedded store.

// No panic reachable from a request: it drops the connection and can leave undeletable objects.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod allocators;
pub mod audit;
pub mod certs_admin;
pub mod cluster_info;
pub mod http;
pub mod kubeconfig;
pub mod kubernetes_service;
pub mod metrics;
pub mod migrate;
pub mod negotiate;
pub mod openapi;
pub mod options;
pub mod policy;
pub mod render;
pub mod rest;
pub mod serve;
pub mod server;
pub mod snapshot;
pub mod status;
pub mod token;

/// The kinds served and their scope: one table, shared with the per-kind rules.
pub use keelson_apiserver_registry::resources;

/// JSON object helpers shared with the other components.
pub use keelson_apimachinery::object;
/// Who a request is and what it may do; the CA and the certificates it signs.
pub use keelson_apiserver_auth::{self as auth, certs};
/// Storage: SQLite or etcd behind one trait, the writer and the watch history.
pub use keelson_apiserver_store as store;

pub use options::Options;
pub use server::{run, ServerError};
