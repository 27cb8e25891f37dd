//! Connecting a tonic channel to a CRI runtime's unix socket (containerd's `grpc.address`).

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Failure to reach the runtime's socket.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect to the CRI runtime at {path}: {source} (is containerd running with this grpc.address?)")]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

/// Opens one HTTP/2 channel to the CRI runtime listening on the unix socket `path`; the channel
/// is cheap to clone and multiplexes concurrent calls.
pub async fn connect_unix(path: impl AsRef<Path>) -> Result<Channel, ConnectError> {
    let path = path.as_ref().to_path_buf();
    let socket = path.clone();
    // The URI is required by tonic but unused: the connector ignores it and dials the socket.
    Endpoint::from_static("http://cri.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .map_err(|source| ConnectError::Connect { path, source })
}
