//! The node: registration and status, lease, machine facts, CNI configuration, the network to
//! other nodes' pods.

pub mod allocatable;
pub mod cni;
pub mod lease;
pub mod machine;
pub mod network;
pub mod pod_cidr;
pub mod registration;
