//! The DNS sockets, bound with IP_FREEBIND: scripts/up listens on the pod bridge's gateway
//! address, which exists only once the node's first pod is wired (the kernel then delivers
//! to the socket already bound).

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, UdpSocket};

fn socket(addr: SocketAddr, ty: Type, proto: Protocol) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv4() {
        s.set_freebind_v4(true)?;
    } else {
        s.set_freebind_v6(true)?;
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

pub fn udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = socket(addr, Type::DGRAM, Protocol::UDP)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

pub fn tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = socket(addr, Type::STREAM, Protocol::TCP)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    TcpListener::from_std(s.into())
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn an_address_not_yet_on_the_machine_can_be_listened_on() {
        // 192.0.2.0/24 is TEST-NET-1: on no interface here, as the bridge before the first pod.
        let addr = "192.0.2.1:0".parse().unwrap();
        super::udp(addr).expect("udp with IP_FREEBIND");
        super::tcp(addr).expect("tcp with IP_FREEBIND");
    }
}
