//! What the DNS tests share: keelson-dns started against a test API server, and DNS and
//! HTTP clients.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use keelson_testing::{binary, free_port, Apiserver, ChildGuard};

/// One query over TCP (two-byte length prefix each way); the server's answer.
pub fn tcp_exchange(server: SocketAddr, query: &Message, timeout: Duration) -> Message {
    let q = query.to_vec().unwrap();
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.write_all(&(q.len() as u16).to_be_bytes()).unwrap();
    s.write_all(&q).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).unwrap();
    Message::from_vec(&buf).unwrap()
}

/// keelson-dns on loopback ports, stopped on drop.
pub struct Dns {
    pub child: ChildGuard,
    pub addr: SocketAddr,
    pub health: SocketAddr,
}

/// keelson-dns as system:kube-dns with `extra` flags.
pub fn start_dns(api: &Apiserver, extra: &[&str]) -> Dns {
    let kubeconfig = api.kubeconfig_for("system:kube-dns", &[]);
    start_dns_with(&kubeconfig, &api.dir.path().join("keelson-dns.log"), extra)
}

/// keelson-dns against the server `kubeconfig` names, its output appended to `log`.
pub fn start_dns_with(kubeconfig: &Path, log: &Path, extra: &[&str]) -> Dns {
    let (port, health_port) = (free_port(), free_port());
    let child = ChildGuard::spawn_logged(
        std::process::Command::new(binary("keelson-dns"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--health-port", &health_port.to_string()])
            .args(extra),
        log,
    );
    Dns {
        child,
        addr: ([127, 0, 0, 1], port).into(),
        health: ([127, 0, 0, 1], health_port).into(),
    }
}

pub fn query_message(name: &str, t: RecordType) -> Message {
    let mut m = Message::new();
    m.set_id(rand_id())
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    m
}

fn rand_id() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub fn udp(dns: &Dns, name: &str, t: RecordType) -> Result<Message, String> {
    udp_within(dns, name, t, Duration::from_secs(2))
}

/// `udp`, waiting up to `timeout` for the answer (a client's resolver timeout).
pub fn udp_within(
    dns: &Dns,
    name: &str,
    t: RecordType,
    timeout: Duration,
) -> Result<Message, String> {
    let q = query_message(name, t);
    let sock = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(timeout)).unwrap();
    sock.send_to(&q.to_vec().unwrap(), dns.addr)
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).map_err(|e| format!("no answer: {e}"))?;
    let resp = Message::from_vec(&buf[..n]).map_err(|e| e.to_string())?;
    assert_eq!(resp.id(), q.id());
    Ok(resp)
}

pub fn tcp(dns: &Dns, name: &str, t: RecordType) -> Message {
    tcp_exchange(dns.addr, &query_message(name, t), Duration::from_secs(2))
}

pub fn ips(m: &Message) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = m
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// A plain HTTP GET: the status code and the whole response.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}
