//! CRI `runtime.v1` as published (k8s.io/cri-api v0.36.3) as tonic clients, plus a connector for
//! the runtime's unix socket.

/// Generated from `proto/api.proto` (package `runtime.v1`).
#[allow(clippy::all, missing_docs, unreachable_pub)]
pub mod runtime {
    pub mod v1 {
        tonic::include_proto!("runtime.v1");
    }
}

mod connect;

pub use connect::{connect_unix, ConnectError};
pub use runtime::v1::image_service_client::ImageServiceClient;
pub use runtime::v1::runtime_service_client::RuntimeServiceClient;
