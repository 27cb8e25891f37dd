//! The load balancer between real TLS servers whose /readyz the test turns on and off: a client's
//! open connection to a server that stops being ready is closed while another is ready, and new
//! connections go to the ready one; TLS passes through untouched. Its /readyz follows the
//! servers, and /metrics counts the connections each server took and shows which are ready.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use keelson_daemon::lb::{LoadBalancer, LoadBalancerConfig};
use keelson_daemon::{serve_connections, Connections};
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{client::TlsStream, TlsAcceptor, TlsConnector};

/// A TLS server that answers /who with its name and /readyz with 200 while `ready`.
struct Server {
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Stops listening: new connections are refused, as when the process is gone.
    fn stop(&self) {
        self.task.abort();
    }
}

async fn server(name: &'static str, cert: &rcgen::CertifiedKey<rcgen::KeyPair>) -> Server {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let ready = Arc::new(AtomicBool::new(true));
    let flag = ready.clone();
    let app = axum::Router::new()
        .route("/who", axum::routing::get(move || async move { name }))
        .route(
            "/readyz",
            axum::routing::get(move || async move {
                match flag.load(Ordering::SeqCst) {
                    true => StatusCode::OK,
                    false => StatusCode::SERVICE_UNAVAILABLE,
                }
            }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = Some(TlsAcceptor::from(Arc::new(config)));
    let limits = Connections::with_max_open(64);
    let task = tokio::spawn(serve_connections(
        listener,
        tls,
        app,
        limits,
        std::future::pending(),
    ));
    Server { addr, ready, task }
}

/// A client trusting the servers' certificate (for "localhost"), connecting through `lb`.
async fn connect(
    lb: SocketAddr,
    cert: &rcgen::CertifiedKey<rcgen::KeyPair>,
) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(lb).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    TlsConnector::from(Arc::new(client))
        .connect(name, tcp)
        .await
        .unwrap()
}

/// Asks /who on a kept-alive connection; None when the connection was closed.
async fn who(stream: &mut TlsStream<TcpStream>) -> Option<String> {
    let ask = b"GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n";
    stream.write_all(ask).await.ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(name) = ["server-a", "server-b"].iter().find(|n| text.ends_with(*n)) {
            return Some(name.to_string());
        }
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// Servers "server-a" and "server-b" on one self-signed certificate, and a balancer (not yet
/// running) in front of them, checking them every 100 ms.
async fn two_servers_behind_a_balancer() -> (
    rcgen::CertifiedKey<rcgen::KeyPair>,
    Server,
    Server,
    LoadBalancer,
) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let a = server("server-a", &cert).await;
    let b = server("server-b", &cert).await;
    let lb = LoadBalancer::bind(LoadBalancerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        endpoints: vec![a.addr.to_string(), b.addr.to_string()],
        health_check_interval: Duration::from_millis(100),
    })
    .await
    .unwrap();
    (cert, a, b, lb)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_follow_the_ready_server() {
    let (cert, a, b, lb) = two_servers_behind_a_balancer().await;
    let lb_addr = lb.local_addr().unwrap();
    tokio::spawn(lb.run());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut open = connect(lb_addr, &cert).await;
    let first = who(&mut open)
        .await
        .expect("an answer through the balancer");
    let (in_use, other) = if first == "server-a" {
        (&a, "server-b")
    } else {
        (&b, "server-a")
    };
    // New connections stick to the server in use while it is ready.
    for _ in 0..3 {
        assert_eq!(
            who(&mut connect(lb_addr, &cert).await).await,
            Some(first.clone())
        );
    }

    // It stops being ready: the open connection is closed (a client reconnects), new ones go
    // to the other server.
    in_use.ready.store(false, Ordering::SeqCst);
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            if who(&mut open).await.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the connection to the unready server stayed open"
    );
    assert_eq!(
        who(&mut connect(lb_addr, &cert).await).await.as_deref(),
        Some(other)
    );

    // Both unready: connections still go somewhere rather than nowhere.
    let other_server = if other == "server-a" { &a } else { &b };
    other_server.ready.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(who(&mut connect(lb_addr, &cert).await).await.is_some());
}

/// GET `path` on the balancer's health port: status code and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, body.to_string())
}

/// The value of the sample `name{labels}` on /metrics (None when there is no such series).
async fn metric(health: SocketAddr, series: &str) -> Option<f64> {
    let (_, text) = get(health, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Polls `check` every 50 ms for up to 5 s; panics with `what` and the last value.
async fn eventually<T: std::fmt::Debug>(
    what: &str,
    mut check: impl AsyncFnMut() -> (bool, T),
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (ok, got) = check().await;
        if ok {
            return got;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("after 5 s, {what}: {got:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_metrics_follow_the_servers() {
    let (cert, a, b, lb) = two_servers_behind_a_balancer().await;
    let lb_addr = lb.local_addr().unwrap();
    let (health, registry) = lb.health_and_metrics();
    let health_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health_addr = health_listener.local_addr().unwrap();
    tokio::spawn(health.serve_on(health_listener, registry));
    tokio::spawn(lb.run());

    assert_eq!(get(health_addr, "/healthz").await.0, 200);
    eventually("/readyz with both servers ready", async || {
        let got = get(health_addr, "/readyz").await;
        (got.0 == 200, got)
    })
    .await;

    // The server that takes a connection counts it; the other does not.
    let mut open = connect(lb_addr, &cert).await;
    let first = who(&mut open)
        .await
        .expect("an answer through the balancer");
    let (in_use, idle) = if first == "server-a" {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let series = |name: &str, s: &Server| format!("{name}{{server=\"{}\"}}", s.addr);
    let connections = |s: &Server| series("keelson_lb_connections_total", s);
    assert_eq!(metric(health_addr, &connections(in_use)).await, Some(1.0));
    assert_eq!(metric(health_addr, &connections(idle)).await, Some(0.0));
    let active = series("keelson_lb_connections_active", in_use);
    assert_eq!(metric(health_addr, &active).await, Some(1.0));
    assert!(who(&mut connect(lb_addr, &cert).await).await.is_some());
    assert_eq!(metric(health_addr, &connections(in_use)).await, Some(2.0));

    // The idle server stops: it shows as not ready and its checks as down; the balancer is
    // still ready through the other.
    idle.stop();
    let ready = |s: &Server| series("keelson_lb_backend_ready", s);
    eventually("the stopped server's ready gauge at 0", async || {
        let got = metric(health_addr, &ready(idle)).await;
        (got == Some(0.0), got)
    })
    .await;
    assert_eq!(metric(health_addr, &ready(in_use)).await, Some(1.0));
    let down = format!(
        "keelson_lb_health_checks_total{{server=\"{}\",result=\"down\"}}",
        idle.addr
    );
    assert!(metric(health_addr, &down).await.unwrap_or(0.0) >= 1.0);
    assert_eq!(get(health_addr, "/readyz").await.0, 200);

    // No server ready: /readyz fails and names them; one ready again: it passes.
    in_use.ready.store(false, Ordering::SeqCst);
    let (_, why) = eventually("/readyz 503 with no server ready", async || {
        let got = get(health_addr, "/readyz").await;
        (got.0 == 503, got)
    })
    .await;
    assert!(why.contains(&idle.addr.to_string()), "{why}");
    assert_eq!(get(health_addr, "/healthz").await.0, 200);
    in_use.ready.store(true, Ordering::SeqCst);
    eventually("/readyz 200 with one server ready again", async || {
        let got = get(health_addr, "/readyz").await;
        (got.0 == 200, got)
    })
    .await;
    drop(open);
}
