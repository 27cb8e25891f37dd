//! What the DNS tests share.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use hickory_proto::op::Message;

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
