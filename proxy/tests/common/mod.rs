//! The packet-flow topology of the proxy's root tests, built on keelson-testing's test hosts:
//! a node with two pods on a bridge, a client and a second node beside it; small TCP/UDP
//! servers in the pods; connection counting; rule dumps of the node.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use keelson_proxy::app::ProxyMode;
use keelson_testing::{require_root_and_tools, TestHost};

/// The test hosts of one test:
///   client (192.168.77.2) --- node (192.168.77.1 | 192.168.78.1, br0 10.244.1.1/24) --- node2 (192.168.78.2)
///                                  |-- pod1 10.244.1.2, pod2 10.244.1.3 (bridge ports, hairpin on)
pub struct Hosts {
    pub node: TestHost,
    pub node2: TestHost,
    pub client: TestHost,
    pub pods: Vec<TestHost>,
}

pub const NODE_IP: &str = "192.168.78.1";
pub const POD_IPS: [&str; 2] = ["10.244.1.2", "10.244.1.3"];

impl Hosts {
    pub fn new() -> Hosts {
        require_root_and_tools(&[
            "ip",
            "nft",
            "iptables-nft-restore",
            "iptables-legacy-restore",
            "conntrack",
        ]);
        let h = Hosts {
            node: TestHost::create("proxy-node"),
            node2: TestHost::create("proxy-node2"),
            client: TestHost::create("proxy-client"),
            pods: vec![
                TestHost::create("proxy-pod1"),
                TestHost::create("proxy-pod2"),
            ],
        };
        let n = &h.node;
        n.sysctl("net.ipv4.ip_forward=1");
        n.ip(&["link", "add", "br0", "type", "bridge"]);
        n.ip(&["addr", "add", "10.244.1.1/24", "dev", "br0"]);
        n.ip(&["link", "set", "br0", "up"]);
        // A real node routes the service range via its default route, so traffic to a Service
        // without endpoints reaches the FORWARD hook (and its REJECT). Test hosts have no default
        // route; this specific route stands in for it and never leaves the test host.
        n.ip(&["route", "add", "10.96.0.0/16", "dev", "br0"]);
        for (i, pod) in h.pods.iter().enumerate() {
            h.attach_pod(&format!("vpod{i}"), pod, POD_IPS[i]);
        }
        n.veth(
            "vclient",
            "192.168.77.1/24",
            &h.client,
            "eth0",
            "192.168.77.2/24",
        );
        n.veth(
            "vnode2",
            "192.168.78.1/24",
            &h.node2,
            "eth0",
            "192.168.78.2/24",
        );
        for net in ["10.96.0.0/16", "192.168.99.0/24"] {
            h.client.ip(&["route", "add", net, "via", "192.168.77.1"]);
        }
        h
    }

    /// A pod on the node's bridge, as a CNI bridge plugin with hairpinMode makes it (a pod can
    /// reach itself via a Service).
    fn attach_pod(&self, port: &str, pod: &TestHost, ip: &str) {
        let n = &self.node;
        n.ip(&[
            "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", &pod.name,
        ]);
        n.ip(&["link", "set", port, "master", "br0", "up"]);
        n.ip(&["link", "set", port, "type", "bridge_slave", "hairpin", "on"]);
        pod.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        pod.ip(&["link", "set", "eth0", "up"]);
        // Specific routes only, never a default route: services, the client network, and node2
        // (replies to it without masquerade: externalTrafficPolicy Local keeps the client IP).
        for net in ["10.96.0.0/16", "192.168.77.0/24", "192.168.78.0/24"] {
            pod.ip(&["route", "add", net, "via", "10.244.1.1"]);
        }
    }
}

/// The node's rules as text to compare (iptables counters left out).
pub fn dump(node: &TestHost, mode: ProxyMode) -> String {
    match mode {
        ProxyMode::Iptables => node
            .sh_ok("iptables-nft-save")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(" [").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        ProxyMode::Nftables => node.sh_ok("nft list table ip keelson"),
    }
}

/// Servers answering with their pod's name, on TCP and UDP ports, until dropped.
pub struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    /// The sockets are opened inside `pod` (so they live there) and served from plain threads.
    pub fn start(pod: &TestHost, name: &str, tcp: &[u16], udp: &[u16]) -> Servers {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for &port in tcp {
            let l = pod.run_in(move || TcpListener::bind(("0.0.0.0", port)).expect("bind tcp"));
            l.set_nonblocking(true).expect("nonblocking");
            let (name, stop) = (name.to_string(), stop.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((mut s, peer)) => {
                            let _ = s.set_nonblocking(false);
                            // The name, then the client address as this pod sees it.
                            let _ = s.write_all(format!("{name} {}\n", peer.ip()).as_bytes());
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            }));
        }
        for &port in udp {
            let s = pod.run_in(move || UdpSocket::bind(("0.0.0.0", port)).expect("bind udp"));
            s.set_read_timeout(Some(Duration::from_millis(50)))
                .expect("timeout");
            let (name, stop) = (name.to_string(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((_, from)) = s.recv_from(&mut buf) {
                        let _ = s.send_to(name.as_bytes(), from);
                    }
                }
            }));
        }
        Servers { stop, threads }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One TCP connection: the name the server answered with.
pub fn tcp_once(addr: SocketAddr) -> std::io::Result<String> {
    let answer = tcp_answer(addr)?;
    Ok(answer.split_whitespace().next().unwrap_or("").to_string())
}

/// One TCP connection: "name client-address-seen-by-the-pod".
pub fn tcp_answer(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out.trim().to_string())
}

/// One UDP exchange from a fresh socket.
pub fn udp_once(addr: SocketAddr) -> std::io::Result<String> {
    let s = UdpSocket::bind("0.0.0.0:0")?;
    udp_on(&s, addr)
}

/// One UDP exchange on a given socket (same source port, so the same conntrack entry).
pub fn udp_on(s: &UdpSocket, addr: SocketAddr) -> std::io::Result<String> {
    s.set_read_timeout(Some(Duration::from_secs(1)))?;
    s.send_to(b"hi", addr)?;
    let mut buf = [0u8; 512];
    let (n, _) = s.recv_from(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).to_string())
}

/// `n` probes (`tcp_once`, `tcp_answer`, `udp_once`) from `host`, counted by answer; failures
/// under "error: ...".
pub fn answers(
    host: &TestHost,
    addr: SocketAddr,
    n: usize,
    probe: fn(SocketAddr) -> std::io::Result<String>,
) -> BTreeMap<String, usize> {
    host.run_in(move || {
        let mut hits = BTreeMap::new();
        for _ in 0..n {
            let key = probe(addr).unwrap_or_else(|e| format!("error: {e}"));
            *hits.entry(key).or_insert(0) += 1;
        }
        hits
    })
}

/// `n` TCP connections from `host`, counted by server name.
pub fn tcp_hits(host: &TestHost, addr: SocketAddr, n: usize) -> BTreeMap<String, usize> {
    answers(host, addr, n, tcp_once)
}

/// Connects from `host` to `target` over and over while `during` runs. Returns what `during`
/// returned and how many connections worked and failed meanwhile.
pub fn hammer<T>(
    host: &TestHost,
    target: SocketAddr,
    during: impl FnOnce() -> T,
) -> (T, usize, usize) {
    /// Stops the connecting thread even when `during` panics (the scope would wait forever).
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = stop.0.clone();
    std::thread::scope(|scope| {
        let counts = scope.spawn(|| {
            host.run_in(move || {
                let (mut ok, mut failed) = (0, 0);
                while !flag.load(Ordering::SeqCst) {
                    match tcp_once(target) {
                        Ok(_) => ok += 1,
                        Err(_) => failed += 1,
                    }
                }
                (ok, failed)
            })
        });
        let out = during();
        drop(stop);
        let (ok, failed) = counts.join().expect("connecting thread");
        (out, ok, failed)
    })
}
