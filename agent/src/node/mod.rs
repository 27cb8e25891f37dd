//! The node: registration and status, lease, machine facts, CNI configuration.

pub mod cni;
pub mod lease;
pub mod machine;
pub mod pod_cidr;
pub mod registration;
pub mod routes;
