//! The health check: a TCP connect, then `GET /readyz` over TLS. The check does not verify the
//! server's certificate: it only decides where bytes go; the clients behind the balancer do
//! their own TLS with the cluster CA end to end. `/readyz` needs no credentials.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

use super::pool::Health;

/// How `endpoint` (host:port) answers now.
pub async fn check(endpoint: &str, tls: Arc<ClientConfig>, timeout: Duration) -> Health {
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect(endpoint)).await {
        Ok(Ok(tcp)) => tcp,
        _ => return Health::Down,
    };
    match tokio::time::timeout(timeout, readyz(tcp, endpoint, tls)).await {
        Ok(Ok(true)) => Health::Ready,
        _ => Health::NotReady,
    }
}

async fn readyz(tcp: TcpStream, endpoint: &str, tls: Arc<ClientConfig>) -> std::io::Result<bool> {
    let host = host_of(endpoint);
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stream = TlsConnector::from(tls).connect(name, tcp).await?;
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).await?;
    Ok(status.starts_with(b"HTTP/1.1 200"))
}

/// The host of host:port, without an IPv6 address's brackets.
fn host_of(endpoint: &str) -> &str {
    let host = endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_endpoints() {
        assert_eq!(host_of("10.0.0.1:6443"), "10.0.0.1");
        assert_eq!(host_of("[fd00::1]:6443"), "fd00::1");
        assert_eq!(host_of("cp1.example:6443"), "cp1.example");
    }

    #[tokio::test]
    async fn a_closed_port_is_down() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let tls = crate::any_server_certificate()
            .unwrap()
            .with_no_client_auth();
        let health = check(&addr, Arc::new(tls), Duration::from_secs(1)).await;
        assert_eq!(health, Health::Down);
    }

    #[tokio::test]
    async fn a_port_that_speaks_no_tls_is_not_ready() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
        });
        let tls = crate::any_server_certificate()
            .unwrap()
            .with_no_client_auth();
        let health = check(&addr, Arc::new(tls), Duration::from_secs(1)).await;
        assert_eq!(health, Health::NotReady);
    }
}
