//! Label and field selectors, the patch formats (strategic merge, merge, JSON patch), name and
//! label validation, quantities, protobuf bodies, base64 `[]byte`, well-known names, and which
//! tolerations match which taints.
//!
//! Pure functions, mostly over `serde_json::Value`: the API server parses request parameters and
//! bodies, calls into this crate, and maps the errors to Kubernetes `Status` responses.

// No panic reachable from a request: it drops the connection and can leave undeletable objects.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod base64;
pub mod cron;
pub mod duration;
mod error;
pub mod fields;
pub mod hash;
pub mod labels;
pub mod node_affinity;
pub mod object;
pub mod patch;
pub mod protobuf;
pub mod quantity;
pub mod quota;
pub mod taints;
pub mod validation;
pub mod volume_match;
pub mod volumes;
pub mod well_known;

pub use duration::{parse_duration, DurationError};
pub use error::SelectorError;
pub use fields::FieldSelector;
pub use labels::LabelSelector;
pub use patch::{apply_patch, json_patch, merge_patch, strategic_merge_patch, PatchError};
