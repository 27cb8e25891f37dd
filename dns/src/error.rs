use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
    #[error("cannot listen on {addr} ({proto}) for DNS: {source}; pick another --listen address")]
    Listen {
        addr: SocketAddr,
        proto: &'static str,
        source: std::io::Error,
    },
}
