//! Errors that stop the agent from starting.

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Connect(#[from] keelson_proto::ConnectError),
    #[error(transparent)]
    Cri(#[from] crate::cri::CriError),
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
    #[error("TLS bootstrap: {0}")]
    Bootstrap(#[from] crate::bootstrap::BootstrapError),
    #[error(transparent)]
    Node(#[from] crate::node::registration::NodeError),
    #[error("creating the agent's root directory {path}: {source}")]
    RootDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the CNI configuration to {path}: {source}")]
    CniConfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no node IP: pass --node-ip (no global IPv4 address found in this network namespace)")]
    NoNodeIp,
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsError),
    #[error("serving on {addr}: {source}")]
    Serve {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}
