//! The thin part: UDP and TCP (RFC 1035 two-byte length prefix) loops around `wire::handle`,
//! and forwarding to `--upstream` over UDP.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;

use crate::metrics::Metrics;
use crate::wire::{self, Handled};
use crate::zone::Zone;

/// The zone being served; None until the first list of Services and EndpointSlices.
pub type ZoneCell = Arc<RwLock<Option<Arc<Zone>>>>;

/// How long an upstream gets to answer, and a TCP client to send its next query.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Open TCP connections at most; more wait to be accepted.
const TCP_MAX_OPEN: usize = 256;

pub struct Server {
    pub zone: ZoneCell,
    pub ttl: u32,
    pub upstream: Option<SocketAddr>,
    pub metrics: Metrics,
}

impl Server {
    /// The response bytes for one request, or None when there is nothing to send back.
    async fn respond(&self, request: &[u8], udp: bool) -> Option<Vec<u8>> {
        let Ok(msg) = Message::from_vec(request) else {
            let resp = wire::format_error(request)?;
            self.metrics.response(ResponseCode::FormErr);
            return wire::encode(&resp, None);
        };
        let zone = match self.zone.read() {
            Ok(z) => z.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let limit = udp.then(|| wire::udp_limit(&msg));
        match wire::handle(zone.as_ref(), self.ttl, self.upstream.is_some(), &msg) {
            Handled::Reply(resp) => {
                self.metrics.response(resp.response_code());
                wire::encode(&resp, limit)
            }
            Handled::Forward => self.forward(request, &msg).await,
        }
    }

    async fn forward(&self, request: &[u8], msg: &Message) -> Option<Vec<u8>> {
        let upstream = self.upstream?;
        self.metrics.forwarded();
        match forward_udp(upstream, request).await {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                tracing::debug!(%upstream, error = %e, "upstream did not answer");
                let mut resp = Message::error_msg(msg.id(), msg.op_code(), ResponseCode::ServFail);
                resp.add_queries(msg.queries().iter().cloned());
                self.metrics.response(ResponseCode::ServFail);
                wire::encode(&resp, None)
            }
        }
    }
}

async fn forward_udp(upstream: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = if upstream.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(upstream).await?;
    sock.send(request).await?;
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(UPSTREAM_TIMEOUT, sock.recv(&mut buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))??;
    buf.truncate(n);
    Ok(buf)
}

/// Answers datagrams until the task is dropped. Zone answers are made inline (they take
/// microseconds); forwarded ones in a task each, so a slow upstream holds up no one.
pub async fn serve_udp(server: Arc<Server>, socket: UdpSocket) {
    let socket = Arc::new(socket);
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(error = %e, "udp receive failed");
                continue;
            }
        };
        let request = buf.get(..n).unwrap_or_default().to_vec();
        let forwards = server.upstream.is_some();
        let (server, socket) = (server.clone(), socket.clone());
        let task = async move {
            if let Some(resp) = server.respond(&request, true).await {
                let _ = socket.send_to(&resp, peer).await;
            }
        };
        if forwards {
            tokio::spawn(task);
        } else {
            task.await;
        }
    }
}

/// Accepts TCP connections until the task is dropped; each may carry many queries.
pub async fn serve_tcp(server: Arc<Server>, listener: TcpListener) {
    let open = Arc::new(Semaphore::new(TCP_MAX_OPEN));
    loop {
        let Ok(permit) = open.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::debug!(error = %e, "tcp accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let server = server.clone();
        tokio::spawn(async move {
            let _ = tcp_connection(&server, stream).await;
            drop(permit);
        });
    }
}

async fn tcp_connection(server: &Server, mut stream: TcpStream) -> std::io::Result<()> {
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE_TIMEOUT, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return Ok(()),
        }
        let mut request = vec![0u8; usize::from(u16::from_be_bytes(len))];
        tokio::time::timeout(TCP_IDLE_TIMEOUT, stream.read_exact(&mut request))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "slow query"))??;
        let Some(resp) = server.respond(&request, false).await else {
            return Ok(());
        };
        let Ok(n) = u16::try_from(resp.len()) else {
            return Ok(());
        };
        let mut out = Vec::with_capacity(resp.len() + 2);
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(&resp);
        stream.write_all(&out).await?;
    }
}
