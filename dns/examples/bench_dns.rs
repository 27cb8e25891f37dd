//! Load generator for scripts/bench dns: `bench_dns SERVER NAMES_FILE SECONDS CONCURRENCY`.
//! CONCURRENCY clients each keep one A query in flight over UDP (1 s timeout), cycling through
//! the names; prints one JSON line: queries per second, p50/p99 latency, errors (timeouts and
//! answers that are not NOERROR with an address).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::net::UdpSocket;

fn query(id: u16, name: &str) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(
            Name::from_ascii(name).expect("a name"),
            RecordType::A,
        ));
    m.to_vec().expect("a query")
}

async fn client(
    server: SocketAddr,
    names: Vec<String>,
    until: Instant,
    start: usize,
) -> (Vec<u32>, u64) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    sock.connect(server).await.expect("connect");
    let (mut lat, mut errors, mut i) = (Vec::new(), 0u64, start);
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        let id = (i % 65536) as u16;
        let q = query(id, &names[i % names.len()]);
        i += 1;
        let t0 = Instant::now();
        sock.send(&q).await.expect("send");
        match tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                let ok = Message::from_vec(&buf[..n])
                    .map(|m| {
                        m.id() == id
                            && m.response_code() == ResponseCode::NoError
                            && !m.answers().is_empty()
                    })
                    .unwrap_or(false);
                if ok {
                    lat.push(t0.elapsed().as_micros() as u32);
                } else {
                    errors += 1;
                }
            }
            _ => errors += 1,
        }
    }
    (lat, errors)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert_eq!(
        args.len(),
        5,
        "usage: bench_dns SERVER NAMES_FILE SECONDS CONCURRENCY"
    );
    let server: SocketAddr = args[1].parse().expect("SERVER as ADDR:PORT");
    let names: Vec<String> = std::fs::read_to_string(&args[2])
        .expect("the names file")
        .lines()
        .map(String::from)
        .collect();
    let seconds: u64 = args[3].parse().expect("SECONDS");
    let concurrency: usize = args[4].parse().expect("CONCURRENCY");
    let began = Instant::now();
    let until = began + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| tokio::spawn(client(server, names.clone(), until, c * 7919)))
        .collect();
    let (mut lat, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (l, e) = t.await.expect("a client");
        lat.extend(l);
        errors += e;
    }
    let elapsed = began.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    println!(
        "{{\"qps\": {:.0}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"answered\": {}, \"errors\": {}}}",
        lat.len() as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        lat.len(),
        errors
    );
}
