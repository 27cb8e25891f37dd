//! The accept loop on a real TLS listener, as clients see it: connections that never finish
//! the handshake, or finish it and say nothing, or send half a header, are closed by the server
//! while requests are still answered; connections over the cap wait in the accept queue.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use keelson_daemon::{serve_connections, Connections};
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{client::TlsStream, TlsAcceptor, TlsConnector};

struct Served {
    addr: SocketAddr,
    connector: TlsConnector,
}

/// A TLS server answering `GET /ping` with "pong", served until the test's runtime ends.
async fn serve(limits: Connections) -> Served {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der()).unwrap();
    let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![generated.cert.der().clone()], key)
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(generated.cert.der().clone()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
    let tls = Some(TlsAcceptor::from(Arc::new(server)));
    tokio::spawn(serve_connections(
        listener,
        tls,
        app,
        limits,
        std::future::pending(),
    ));
    Served {
        addr,
        connector: TlsConnector::from(Arc::new(client)),
    }
}

impl Served {
    async fn tls(&self) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        self.connector.connect(name, tcp).await.unwrap()
    }

    /// The whole response to `GET path` over HTTP/1.1 on a new connection.
    async fn get(&self, path: &str) -> String {
        let mut tls = self.tls().await;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    }
}

fn limits(timeout: Duration, max_open: usize) -> Connections {
    Connections {
        handshake_timeout: timeout,
        header_read_timeout: timeout,
        ..Connections::with_max_open(max_open)
    }
}

/// Whether the server closed the connection: end of stream or an error, before a guard of a
/// minute (far beyond the timeouts here; it only keeps a broken server from hanging the test).
async fn closed_by_server(mut stream: impl AsyncReadExt + Unpin) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

async fn all_closed_by_server<S: AsyncReadExt + Unpin + Send + 'static>(streams: Vec<S>) -> usize {
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(closed_by_server(s)))
        .collect();
    let mut closed = 0;
    for t in tasks {
        closed += usize::from(t.await.unwrap());
    }
    closed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_half_sent_connections_are_closed_while_requests_are_answered() {
    let served = serve(limits(Duration::from_secs(2), 1000)).await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(served.addr).await.unwrap());
    }
    let mut silent = Vec::new();
    let mut half_sent = Vec::new();
    for _ in 0..100 {
        silent.push(served.tls().await);
        let mut tls = served.tls().await;
        tls.write_all(b"GET /ping HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .unwrap();
        half_sent.push(tls);
    }
    let answer = served.get("/ping").await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("pong"),
        "{answer}"
    );
    assert_eq!(all_closed_by_server(idle).await, 300, "no TLS handshake");
    assert_eq!(
        all_closed_by_server(silent).await,
        100,
        "handshake, then nothing"
    );
    assert_eq!(all_closed_by_server(half_sent).await, 100, "half a header");
    let answer = served.get("/ping").await;
    assert!(answer.ends_with("pong"), "{answer}");
}

/// The listener's accept queue length, from `ss` (Recv-Q of a listening socket).
fn accept_queue(port: u16) -> usize {
    let out = std::process::Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    let recv_q = text.split_whitespace().nth(1).unwrap_or("0");
    recv_q.parse().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_until_one_closes() {
    let served = Arc::new(serve(limits(Duration::from_secs(600), 3)).await);
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(served.addr).await.unwrap());
    }
    let waiting = served.clone();
    let request = tokio::spawn(async move { waiting.get("/ping").await });
    let mut queued = 0;
    for _ in 0..600 {
        queued = accept_queue(served.addr.port());
        if queued == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(queued, 1, "the fourth connection waits in the accept queue");
    assert!(!request.is_finished());
    idle.pop();
    let answer = request.await.unwrap();
    assert!(answer.ends_with("pong"), "{answer}");
}
