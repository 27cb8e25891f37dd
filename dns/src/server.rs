//! The thin part: UDP and TCP (RFC 1035 two-byte length prefix) loops around `wire::handle`,
//! and names outside the zones passed to the forwarder (`--upstream`).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;

use crate::forward::Forwarder;
use crate::metrics::Metrics;
use crate::wire::{self, Handled};
use crate::zone::Zone;

/// The zone being served; None until the first list of Services and EndpointSlices.
pub type ZoneCell = Arc<RwLock<Option<Arc<Zone>>>>;

/// How long a TCP client gets to send its next query.
const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Open TCP connections at most; more wait to be accepted.
const TCP_MAX_OPEN: usize = 256;

pub struct Server {
    pub zone: ZoneCell,
    pub ttl: u32,
    /// None: names outside the zones are refused.
    pub forward: Option<Forwarder>,
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
        let forwarding = self.forward.is_some();
        let resp = match wire::handle(zone.as_ref(), self.ttl, forwarding, &msg) {
            Handled::Reply(resp) => resp,
            Handled::Forward => self.forward(request, &msg, !udp).await,
        };
        self.metrics.response(resp.response_code());
        wire::encode(&resp, limit)
    }

    /// The upstreams' answer, or SERVFAIL when none answered.
    async fn forward(&self, request: &[u8], msg: &Message, tcp: bool) -> Message {
        let answer = match &self.forward {
            Some(f) => f.resolve(request, msg, tcp).await,
            None => None,
        };
        answer.unwrap_or_else(|| {
            let mut resp = Message::error_msg(msg.id(), msg.op_code(), ResponseCode::ServFail);
            resp.add_queries(msg.queries().iter().cloned());
            resp
        })
    }
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
        let forwards = server.forward.is_some();
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
