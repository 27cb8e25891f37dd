//! Connections that never finish the TLS handshake or never finish their header, as a careless
//! or hostile client leaves them: /readyz still answers beside 2,000 of them, the server closes
//! them after its timeouts, and out of file descriptors it backs off, logs little and answers
//! again once they are closed. (The latency figures are `scripts/bench connections`.)

use std::net::SocketAddr;
use std::time::Duration;

use keelson_testing::{eventually, process::run_ok, require_tools, Apiserver};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Seconds the server gives a connection for its handshake and for its header: short, so that
/// the test sees the connections closed.
const TIMEOUT_SECONDS: &str = "5";

/// A server whose handshake and header-read timeouts are `TIMEOUT_SECONDS` (every test here
/// sets the same values, so the order of tests does not matter).
fn start() -> Apiserver {
    std::env::set_var(
        keelson_daemon::connections::HANDSHAKE_TIMEOUT_ENV,
        TIMEOUT_SECONDS,
    );
    std::env::set_var(
        keelson_daemon::connections::HEADER_READ_TIMEOUT_ENV,
        TIMEOUT_SECONDS,
    );
    Apiserver::start()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("a tokio runtime")
}

fn addr(api: &Apiserver) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], api.port))
}

/// TCP connections that send nothing.
async fn idle(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        streams.push(TcpStream::connect(addr).await.expect("connect"));
    }
    streams
}

/// TLS connections that sent half a request header.
async fn half_sent(api: &Apiserver, n: usize) -> Vec<tokio_rustls::client::TlsStream<TcpStream>> {
    let connector = keelson_testing::tls::connector(&api.dir.path().join("ca.crt"));
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        let tcp = TcpStream::connect(addr(api)).await.expect("connect");
        let mut tls = connector
            .connect(name.clone(), tcp)
            .await
            .expect("handshake");
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slo")
            .await
            .expect("half a header");
        streams.push(tls);
    }
    streams
}

/// How many of `streams` the server closed (end of stream or an error) within a guard of two
/// minutes, far beyond the timeouts (it only keeps a broken server from hanging the test).
async fn closed_by_server<S>(streams: Vec<S>) -> usize
where
    S: AsyncReadExt + Unpin + Send + 'static,
{
    let reads: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let read = tokio::time::timeout(Duration::from_secs(120), s.read(&mut buf));
                matches!(read.await, Ok(Ok(0)) | Ok(Err(_)))
            })
        })
        .collect();
    let mut closed = 0;
    for read in reads {
        closed += usize::from(read.await.expect("a read task"));
    }
    closed
}

fn readyz(api: &Apiserver) -> Result<(), String> {
    match api.curl("GET", "/readyz", None, None, None) {
        (200, body) if body == "ok" => Ok(()),
        (code, body) => Err(format!("/readyz answered {code}: {body}")),
    }
}

#[test]
fn readyz_answers_beside_a_thousand_idle_and_a_thousand_half_sent_connections() {
    require_tools(&["curl"]);
    let api = start();
    runtime().block_on(async {
        let half_sent = half_sent(&api, 1000).await;
        let idle = idle(addr(&api), 1000).await;
        readyz(&api).expect("/readyz beside 2,000 open connections");
        assert_eq!(closed_by_server(idle).await, 1000, "no TLS handshake");
        assert_eq!(closed_by_server(half_sent).await, 1000, "half a header");
    });
    readyz(&api).expect("/readyz afterwards");
}

/// Open file descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

#[test]
fn out_of_file_descriptors_it_backs_off_logs_little_and_answers_again() {
    require_tools(&["curl", "prlimit"]);
    let api = start();
    let pid = api.pid().expect("the server's pid");
    // Room for 50 more connections; the 150 below run the server out of file descriptors.
    let limit = open_fds(pid) + 50;
    run_ok(std::process::Command::new("prlimit").args([
        "--pid",
        &pid.to_string(),
        &format!("--nofile={limit}:{limit}"),
    ]));
    runtime().block_on(async {
        let idle = idle(addr(&api), 150).await;
        eventually("accept to fail", Duration::from_secs(60), || {
            let log = api.log();
            if log.contains("Too many open files") {
                Ok(())
            } else {
                Err(format!("no accept error yet; log:\n{log}"))
            }
        });
        // The idle connections are closed by the handshake timeout, 50 at a time, and the
        // server takes the next ones from its accept queue, then curl's.
        eventually("/readyz", Duration::from_secs(90), || readyz(&api));
        assert_eq!(closed_by_server(idle).await, 150);
    });
    readyz(&api).expect("/readyz afterwards");
    let log = api.log();
    assert!(log.len() < 16 * 1024, "{} bytes of log:\n{log}", log.len());
}

/// The soft and hard limits on open files of a process ("self" or a pid).
fn open_files_limits(pid: &str) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut numbers = line.split_whitespace().filter_map(|w| w.parse().ok());
    let soft = numbers.next().expect("a soft limit");
    let hard = numbers.next().expect("a hard limit");
    (soft, hard)
}

#[test]
fn the_server_raises_its_soft_limit_on_open_files_to_the_hard_one() {
    require_tools(&["curl", "prlimit"]);
    // The server inherits the test's limits: a soft limit below the hard one, as systemd gives
    // services (1,024 of 524,288). Half the hard limit leaves the other tests here room enough.
    let (_, hard) = open_files_limits("self");
    let soft = hard / 2;
    run_ok(std::process::Command::new("prlimit").args([
        "--pid",
        &std::process::id().to_string(),
        &format!("--nofile={soft}:"),
    ]));
    assert_eq!(open_files_limits("self"), (soft, hard));
    let api = start();
    let pid = api.pid().expect("the server's pid").to_string();
    assert_eq!(open_files_limits(&pid), (hard, hard));
}
