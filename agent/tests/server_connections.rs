//! The agent's HTTPS port (10250) with connections that never start the TLS handshake, as a
//! careless or hostile client on the node's network leaves them: /healthz still answers beside
//! them, and the agent closes them after its handshake timeout.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use keelson_daemon::connections::HANDSHAKE_TIMEOUT_ENV;

/// Whether the agent closed the connection (end of stream or an error) within a guard of two
/// minutes, far beyond the timeout (it only keeps a broken agent from hanging the test).
fn closed_by_agent(mut stream: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let guard = Some(Duration::from_secs(120));
    stream.set_read_timeout(guard).expect("a read timeout");
    match stream.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn healthz_answers_beside_idle_connections_that_the_agent_closes() {
    // Short, so that the test sees the connections closed; the agent inherits it.
    std::env::set_var(HANDSHAKE_TIMEOUT_ENV, "5");
    let cluster = Cluster::start("sc");
    let target = format!("{NODE_IP}:10250");
    let idle: Vec<TcpStream> = cluster.cp.run_in(move || {
        (0..200)
            .map(|_| TcpStream::connect(&target).expect("connect to 10250"))
            .collect()
    });
    let healthz = cluster.on_node(
        "curl",
        &["-sk", "-m", "5", "https://127.0.0.1:10250/healthz"],
    );
    assert_eq!(healthz.as_deref(), Ok("ok"), "beside 200 idle connections");
    let closed = idle.into_iter().filter(closed_by_agent).count();
    assert_eq!(closed, 200, "closed by the agent");
    let healthz = cluster.on_node(
        "curl",
        &["-sk", "-m", "5", "https://127.0.0.1:10250/healthz"],
    );
    assert_eq!(healthz.as_deref(), Ok("ok"), "afterwards");
}
