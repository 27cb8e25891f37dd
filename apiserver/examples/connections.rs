//! /readyz latency beside connections that never finish their handshake or header (the
//! hardening target: 1,000 of them must not delay /readyz beyond 100 ms), beside the floor of the
//! same requests with no such connections, in the same run. Each request is a new TLS
//! connection, as a probe or curl makes it.
//!
//! Usage: connections DATA_DIR PORT [N]: a running keelson-apiserver on 127.0.0.1:PORT whose CA
//! is DATA_DIR/ca.crt; N idle and N half-sent connections (default 1,000 each).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{client::TlsStream, TlsConnector};

const REQUESTS: usize = 200;

struct Target {
    addr: SocketAddr,
    connector: TlsConnector,
}

impl Target {
    async fn tls(&self) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        let name = ServerName::IpAddress(self.addr.ip().into());
        self.connector.connect(name, tcp).await.expect("handshake")
    }

    /// Milliseconds for one `GET /readyz` on a new connection, handshake included.
    async fn readyz_ms(&self) -> f64 {
        let start = Instant::now();
        let mut tls = self.tls().await;
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        assert!(response.starts_with(b"HTTP/1.1 200"), "/readyz failed");
        start.elapsed().as_secs_f64() * 1000.0
    }
}

/// p50, p99 and max of `REQUESTS` sequential requests, in milliseconds.
async fn latencies(target: &Target) -> [f64; 3] {
    let mut ms = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        ms.push(target.readyz_ms().await);
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.99), at(1.0)]
}

fn report(name: &str, value: f64, baseline: Option<f64>) {
    let base = baseline.map_or(String::new(), |b| format!("   (floor {b:.3} ms)"));
    println!("{name:<48} {value:>10.3} ms{base}");
    let mut j =
        serde_json::json!({ "bench": "connections", "figure": name, "value": value, "unit": "ms" });
    if let Some(b) = baseline {
        j["baseline"] =
            serde_json::json!({ "name": name.replace("beside", "without"), "value": b });
    }
    println!("{j}");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, port) = (&args[1], args[2].parse::<u16>().expect("PORT"));
    let n: usize = args.get(3).map_or(1000, |s| s.parse().expect("N"));
    let target = Target {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        connector: keelson_testing::tls::connector(&Path::new(dir).join("ca.crt")),
    };
    eprintln!("floor: {REQUESTS} requests with no other connections...");
    let floor = latencies(&target).await;
    eprintln!("opening {n} idle and {n} half-sent connections...");
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(TcpStream::connect(target.addr).await.expect("connect"));
    }
    let mut half_sent = Vec::new();
    for _ in 0..n {
        let mut tls = target.tls().await;
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slo")
            .await
            .expect("half a header");
        half_sent.push(tls);
    }
    eprintln!("{REQUESTS} requests beside them...");
    let beside = latencies(&target).await;
    for (i, q) in ["p50", "p99", "max"].iter().enumerate() {
        let name = format!("/readyz {q} beside {n}+{n} idle connections");
        report(&name, beside[i], Some(floor[i]));
    }
    drop((held, half_sent));
    tokio::time::sleep(Duration::from_millis(10)).await;
}
