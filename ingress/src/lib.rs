//! keelson-ingress: Ingresses of one IngressClass controller, served by a real nginx.
//!
//! `model` (which Ingresses, what routes), `endpoints` (which pod addresses), `tls` (which
//! certificates) and `render` (nginx.conf text) are pure;
//! `nginx` owns the nginx process; `controller` watches the API and ties them together.

pub mod controller;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod inputs;
pub mod isolate;
pub mod metrics;
pub mod model;
pub mod nginx;
pub mod render;
pub mod retry;
pub mod tls;
pub mod worker;
