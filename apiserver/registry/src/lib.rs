//! Per-kind rules of the API server: defaulting, validation, and the Tables kubectl get prints.
//!
//! Everything here is pure: objects come in as `serde_json::Value` (the v1 wire form) and the
//! rules follow upstream kube-apiserver (SetDefaults_*, Validate*, the internalversion printers),
//! so real clients see the same defaults, the same 422 causes and the same `kubectl get` columns.

// No panic reachable from a request: it drops the connection and can leave undeletable objects.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod autoscaling_v1;
mod cause;
pub mod custom;
mod defaults;
pub mod events_v1;
mod json;
pub mod limits;
mod path;
pub mod pki;
pub use keelson_apimachinery::quantity;
pub mod resources;
pub mod schema;
pub mod service_update;
mod tables;
mod validation;

pub use cause::Cause;
pub use defaults::apply_defaults;
pub use tables::{cells, columns, human_age, Column};
pub use validation::{validate, validate_ephemeral_containers, SYSTEM_PRIORITY_CLASSES};
