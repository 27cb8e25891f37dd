//! Names outside the cluster's zones, as CoreDNS's forward and cache plugins answer them: from
//! the cache while an answer lasts, else from the upstreams in turn, the last one that answered
//! first (one that fails or times out is passed over). A client's UDP question goes out over
//! UDP, its TCP question over TCP; an answer must carry the question's id.

pub mod cache;
pub mod resolv;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use crate::metrics::Metrics;

/// How long one upstream gets to answer before the next is asked.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);
/// Answers kept at most (CoreDNS's default capacity is about ten thousand).
const CACHE_CAPACITY: usize = 10_000;

pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    /// The upstream that answered last: asked first.
    preferred: AtomicUsize,
    cache: Mutex<cache::Cache>,
    metrics: Metrics,
}

impl Forwarder {
    /// None without upstreams: names outside the zones are refused then.
    pub fn new(upstreams: Vec<SocketAddr>, cache_max_ttl: u32, metrics: Metrics) -> Option<Self> {
        (!upstreams.is_empty()).then(|| Forwarder {
            upstreams,
            preferred: AtomicUsize::new(0),
            cache: Mutex::new(cache::Cache::new(CACHE_CAPACITY, cache_max_ttl)),
            metrics,
        })
    }

    /// The answer to `question` (whose wire form is `request`), None when no upstream gave one.
    pub async fn resolve(&self, request: &[u8], question: &Message, tcp: bool) -> Option<Message> {
        let key = cache::Key::of(question);
        if let Some(k) = &key {
            let kept = self.with_cache(|c| c.get(k, Instant::now())).flatten();
            if let Some((mut answer, kind)) = kept {
                answer.set_id(question.id());
                self.metrics.cache_hit(kind.name());
                return Some(answer);
            }
            self.metrics.cache_miss();
        }
        self.metrics.forwarded();
        let mut answer = self.exchange(request, question.id(), tcp).await?;
        if let Some(k) = key {
            let entries = self.with_cache(|c| {
                c.insert(k, &mut answer, Instant::now());
                c.len()
            });
            self.metrics.cache_entries(entries.unwrap_or(0));
        }
        Some(answer)
    }

    fn with_cache<T>(&self, f: impl FnOnce(&mut cache::Cache) -> T) -> Option<T> {
        self.cache.lock().ok().map(|mut c| f(&mut c))
    }

    async fn exchange(&self, request: &[u8], id: u16, tcp: bool) -> Option<Message> {
        let n = self.upstreams.len();
        let first = self.preferred.load(Ordering::Relaxed);
        for i in 0..n {
            let at = (first + i) % n;
            let upstream = *self.upstreams.get(at)?;
            let asked = match tcp {
                true => exchange_tcp(upstream, request).await,
                false => exchange_udp(upstream, request, id).await,
            };
            match asked.and_then(|bytes| parse(&bytes, id)) {
                Ok(answer) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Some(answer);
                }
                Err(e) => tracing::debug!(%upstream, error = %e, "upstream did not answer"),
            }
        }
        None
    }
}

fn parse(bytes: &[u8], id: u16) -> std::io::Result<Message> {
    let answer = Message::from_vec(bytes).map_err(std::io::Error::other)?;
    if answer.id() != id {
        return Err(std::io::Error::other("an answer to another question"));
    }
    Ok(answer)
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer")
}

/// One datagram out, the first one back from that upstream with the question's id.
async fn exchange_udp(upstream: SocketAddr, request: &[u8], id: u16) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = if upstream.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(upstream).await?;
    sock.send(request).await?;
    let mut buf = vec![0u8; 65535];
    let deadline = tokio::time::Instant::now() + UPSTREAM_TIMEOUT;
    loop {
        let n = tokio::time::timeout_at(deadline, sock.recv(&mut buf))
            .await
            .map_err(|_| timed_out())??;
        let reply = buf.get(..n).unwrap_or_default();
        if reply.get(..2) == Some(&id.to_be_bytes()[..]) {
            return Ok(reply.to_vec());
        }
    }
}

/// The question over TCP (RFC 1035's two-byte length prefix), one connection each.
async fn exchange_tcp(upstream: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let asked = async {
        let mut stream = TcpStream::connect(upstream).await?;
        let len = u16::try_from(request.len()).map_err(std::io::Error::other)?;
        let mut out = Vec::with_capacity(request.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(request);
        stream.write_all(&out).await?;
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut reply).await?;
        Ok(reply)
    };
    tokio::time::timeout(UPSTREAM_TIMEOUT, asked)
        .await
        .map_err(|_| timed_out())?
}
