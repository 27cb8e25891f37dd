//! HTTPS for httpGet probes and lifecycle hooks. As the kubelet's (InsecureSkipVerify), the
//! pod's certificate is not checked against any CA: it is meant for the pod's clients, and the
//! node has no trust anchor for it. The handshake's signature is still checked against it.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A TLS session over `tcp` to `host` (a name or an address), whatever its certificate.
pub async fn connect(host: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>, String> {
    let config = keelson_daemon::any_server_certificate()
        .map_err(|e| e.to_string())?
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}
