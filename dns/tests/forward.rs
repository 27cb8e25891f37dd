//! Names outside the cluster domain, forwarded: the real keelson-dns with `--upstream` naming a
//! dead upstream first and then a DNS server written here (loopback only), as CoreDNS's
//! forward and cache plugins: the dead one is passed over, answers and denials come back and
//! are then served from the cache (the upstream asked once) with TTLs capped and counted down,
//! TCP questions go out over TCP, and the cache's hits show on /metrics.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{http_get, ips, start_dns, tcp, udp, udp_within};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use keelson_testing::{eventually, Apiserver};

/// Questions the upstream got, by "name transport".
type Asked = Arc<Mutex<HashMap<String, usize>>>;

/// The answer of the test upstream: `*.example.` names starting with "missing" do not exist
/// (an SOA with a 20 s negative TTL), every other one is 192.0.2.7 for 300 s.
fn answer(question: &Message) -> Message {
    let mut m = Message::new();
    m.set_id(question.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(true)
        .set_recursion_available(true)
        .add_queries(question.queries().iter().cloned());
    let name = question.queries()[0].name().clone();
    if name.to_ascii().starts_with("missing") {
        let apex = Name::from_ascii("example.").unwrap();
        let soa = SOA::new(apex.clone(), apex.clone(), 1, 7200, 900, 86400, 20);
        m.set_response_code(ResponseCode::NXDomain);
        m.add_name_server(Record::from_rdata(apex, 300, RData::SOA(soa)));
    } else {
        m.add_answer(Record::from_rdata(
            name,
            300,
            RData::A(A::new(192, 0, 2, 7)),
        ));
    }
    m
}

fn count(asked: &Asked, question: &Message, transport: &str) {
    let name = question.queries()[0].name().to_ascii();
    *asked
        .lock()
        .unwrap()
        .entry(format!("{name} {transport}"))
        .or_default() += 1;
}

/// The upstream on 127.0.0.1, UDP and TCP on one port, for the test's life.
fn start_upstream(asked: Asked) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap();
    let udp = UdpSocket::bind(addr).unwrap();
    let by_udp = asked.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok((n, peer)) = udp.recv_from(&mut buf) {
            let q = Message::from_vec(&buf[..n]).unwrap();
            count(&by_udp, &q, "udp");
            let _ = udp.send_to(&answer(&q).to_vec().unwrap(), peer);
        }
    });
    std::thread::spawn(move || {
        for mut s in tcp.incoming().flatten() {
            let mut len = [0u8; 2];
            if s.read_exact(&mut len).is_err() {
                continue;
            }
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut buf).unwrap();
            let q = Message::from_vec(&buf).unwrap();
            count(&asked, &q, "tcp");
            let out = answer(&q).to_vec().unwrap();
            s.write_all(&(out.len() as u16).to_be_bytes()).unwrap();
            s.write_all(&out).unwrap();
        }
    });
    addr
}

fn asked(a: &Asked, key: &str) -> usize {
    a.lock().unwrap().get(key).copied().unwrap_or(0)
}

#[test]
fn outside_names_go_to_the_upstreams_and_come_back_from_the_cache() {
    let api = Apiserver::start();
    let log: Asked = Arc::default();
    let upstream = start_upstream(log.clone());
    // Bound and never read: questions sent there get no answer.
    let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
    let upstreams = format!("{},{upstream}", dead.local_addr().unwrap());
    let dns = start_dns(&api, &["--upstream", &upstreams, "--cache-max-ttl", "30"]);
    eventually("keelson-dns ready", Duration::from_secs(30), || {
        let listening = std::net::TcpStream::connect(dns.health).is_ok();
        (listening && http_get(dns.health, "/readyz").0 == 200)
            .then_some(())
            .ok_or("not ready".to_string())
    });

    // The dead upstream is passed over once its time is up (2 s), within the client's 5 s.
    // 5 s: resolv.conf's default timeout, which the 2 s passing over must fit in.
    let first = udp_within(&dns, "www.example.", RecordType::A, Duration::from_secs(5)).unwrap();
    assert_eq!(first.response_code(), ResponseCode::NoError, "{first:?}");
    assert_eq!(
        ips(&first),
        vec!["192.0.2.7".parse::<std::net::IpAddr>().unwrap()]
    );
    assert!(!first.authoritative(), "not our zone");
    let ttl = first.answers()[0].ttl();
    assert!(ttl <= 30, "the TTL is capped at --cache-max-ttl: {ttl}");
    std::thread::sleep(Duration::from_millis(1100));
    let again = udp(&dns, "WWW.example.", RecordType::A).unwrap();
    assert_eq!(ips(&again), ips(&first));
    assert!(again.answers()[0].ttl() < ttl, "counted down: {again:?}");
    assert_eq!(asked(&log, "www.example. udp"), 1, "{log:?}");

    // A denial, with the upstream's SOA, is kept too.
    for _ in 0..2 {
        let m = udp(&dns, "missing.example.", RecordType::A).unwrap();
        assert_eq!(m.response_code(), ResponseCode::NXDomain, "{m:?}");
        let soa = m.name_servers().first().expect("the SOA in authority");
        assert_eq!(soa.name().to_ascii(), "example.");
        assert!(soa.ttl() <= 300);
    }
    assert_eq!(asked(&log, "missing.example. udp"), 1, "{log:?}");

    // A question over TCP goes out over TCP.
    let m = tcp(&dns, "tcp.example.", RecordType::A);
    assert_eq!(ips(&m), ips(&first));
    assert_eq!(asked(&log, "tcp.example. tcp"), 1, "{log:?}");
    assert_eq!(asked(&log, "tcp.example. udp"), 0, "{log:?}");

    let (_, metrics) = http_get(dns.health, "/metrics");
    for line in [
        "keelson_dns_cache_hits_total{type=\"success\"} 1",
        "keelson_dns_cache_hits_total{type=\"denial\"} 1",
        "keelson_dns_cache_misses_total 3",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    drop(dead);
}
