//! Test hosts for packet-flow tests: network namespaces joined by veth pairs, with small TCP/UDP
//! servers inside "pod" namespaces. Everything is created under the "kp-<pid>-<rand>" prefix and
//! removed on drop; leftovers of crashed runs (whose pid is gone) are removed first.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub const PREFIX: &str = "kp-";

fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e} (install scripts/deps.d/proxy.txt)"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fails loudly when the machine cannot run packet-flow tests.
pub fn require_root_and_tools() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "packet-flow tests need root (they create network namespaces)"
    );
    for tool in [
        "ip",
        "nft",
        "iptables-nft-restore",
        "iptables-legacy-restore",
        "conntrack",
    ] {
        let found = std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .chain(["/usr/sbin", "/sbin"])
            .any(|d| std::path::Path::new(d).join(tool).exists());
        assert!(
            found,
            "{tool} is missing: install the packages in scripts/deps.d/proxy.txt"
        );
    }
}

/// Removes namespaces left by earlier runs whose process is gone.
fn remove_leftovers() {
    let list = run(&["ip", "netns", "list"]);
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

pub fn netns_path(name: &str) -> String {
    format!("/var/run/netns/{name}")
}

/// Runs `f` on a thread that entered network namespace `ns`; sockets it creates live there.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = netns_path(ns);
    std::thread::spawn(move || {
        enter(&path);
        f()
    })
    .join()
    .expect("thread in namespace panicked")
}

fn enter(path: &str) {
    let file = File::open(path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    // SAFETY: setns on this thread only; the fd stays open for the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
}

/// Servers answering with their pod's name, on TCP and UDP ports, until dropped.
pub struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    pub fn start(ns: &str, name: &str, tcp: &[u16], udp: &[u16]) -> Servers {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for &port in tcp {
            let (path, name, stop) = (netns_path(ns), name.to_string(), stop.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            threads.push(std::thread::spawn(move || {
                enter(&path);
                let l = TcpListener::bind(("0.0.0.0", port)).expect("bind tcp");
                l.set_nonblocking(true).expect("nonblocking");
                let _ = tx.send(());
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
            rx.recv_timeout(Duration::from_secs(5))
                .expect("tcp server started");
        }
        for &port in udp {
            let (path, name, stop) = (netns_path(ns), name.to_string(), stop.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            threads.push(std::thread::spawn(move || {
                enter(&path);
                let s = UdpSocket::bind(("0.0.0.0", port)).expect("bind udp");
                s.set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("timeout");
                let _ = tx.send(());
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((_, from)) = s.recv_from(&mut buf) {
                        let _ = s.send_to(name.as_bytes(), from);
                    }
                }
            }));
            rx.recv_timeout(Duration::from_secs(5))
                .expect("udp server started");
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

/// `n` connections from namespace `ns`, counted by full answer (name and seen client address).
pub fn tcp_answers(ns: &str, addr: SocketAddr, n: usize) -> BTreeMap<String, usize> {
    in_ns(ns, move || {
        let mut hits = BTreeMap::new();
        for _ in 0..n {
            let key = tcp_answer(addr).unwrap_or_else(|e| format!("error: {e}"));
            *hits.entry(key).or_insert(0) += 1;
        }
        hits
    })
}

/// `n` connections from namespace `ns`: answers counted by server name, failures under "error".
pub fn tcp_hits(ns: &str, addr: SocketAddr, n: usize) -> BTreeMap<String, usize> {
    in_ns(ns, move || {
        let mut hits = BTreeMap::new();
        for _ in 0..n {
            let key = tcp_once(addr).unwrap_or_else(|e| format!("error: {e}"));
            *hits.entry(key).or_insert(0) += 1;
        }
        hits
    })
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

/// The test hosts of one test:
///   client (192.168.77.2) --- node (192.168.77.1 | 192.168.78.1, br0 10.244.1.1/24) --- node2 (192.168.78.2)
///                                  |-- pod1 10.244.1.2, pod2 10.244.1.3 (bridge ports, hairpin on)
pub struct Hosts {
    pub node: String,
    pub node2: String,
    pub client: String,
    pub pods: Vec<String>,
}

pub const NODE_IP: &str = "192.168.78.1";
pub const POD_IPS: [&str; 2] = ["10.244.1.2", "10.244.1.3"];

fn ns_run(ns: &str, args: &[&str]) {
    let mut full = vec!["ip", "netns", "exec", ns];
    full.extend_from_slice(args);
    run(&full);
}

impl Hosts {
    pub fn new() -> Hosts {
        require_root_and_tools();
        remove_leftovers();
        let id = format!(
            "{PREFIX}{}-{:06x}",
            std::process::id(),
            rand::random::<u32>() & 0xffffff
        );
        let h = Hosts {
            node: format!("{id}-node"),
            node2: format!("{id}-node2"),
            client: format!("{id}-client"),
            pods: vec![format!("{id}-pod1"), format!("{id}-pod2")],
        };
        for ns in [&h.node, &h.node2, &h.client]
            .into_iter()
            .chain(h.pods.iter())
        {
            run(&["ip", "netns", "add", ns]);
            ns_run(ns, &["ip", "link", "set", "lo", "up"]);
        }
        let n = h.node.as_str();
        ns_run(n, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        ns_run(n, &["ip", "link", "add", "br0", "type", "bridge"]);
        ns_run(n, &["ip", "addr", "add", "10.244.1.1/24", "dev", "br0"]);
        ns_run(n, &["ip", "link", "set", "br0", "up"]);
        // A real node routes the service range via its default route, so traffic to a Service
        // without endpoints reaches the FORWARD hook (and its REJECT). Test hosts have no default
        // route; this specific route stands in for it and never leaves the test host.
        ns_run(n, &["ip", "route", "add", "10.96.0.0/16", "dev", "br0"]);
        for (i, pod) in h.pods.iter().enumerate() {
            let port = format!("vpod{i}");
            run(&[
                "ip", "-n", n, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", pod,
            ]);
            ns_run(n, &["ip", "link", "set", &port, "master", "br0", "up"]);
            // What a CNI bridge plugin with hairpinMode does: lets a pod reach itself via a Service.
            ns_run(
                n,
                &[
                    "ip",
                    "link",
                    "set",
                    &port,
                    "type",
                    "bridge_slave",
                    "hairpin",
                    "on",
                ],
            );
            ns_run(
                pod,
                &[
                    "ip",
                    "addr",
                    "add",
                    &format!("{}/24", POD_IPS[i]),
                    "dev",
                    "eth0",
                ],
            );
            ns_run(pod, &["ip", "link", "set", "eth0", "up"]);
            // Specific routes only: services and the client network, never a default route.
            ns_run(
                pod,
                &["ip", "route", "add", "10.96.0.0/16", "via", "10.244.1.1"],
            );
            ns_run(
                pod,
                &["ip", "route", "add", "192.168.77.0/24", "via", "10.244.1.1"],
            );
            // Replies to node2 without masquerade (externalTrafficPolicy Local keeps the client IP).
            ns_run(
                pod,
                &["ip", "route", "add", "192.168.78.0/24", "via", "10.244.1.1"],
            );
        }
        for (peer, node_ip, peer_ip) in [
            (h.client.as_str(), "192.168.77.1/24", "192.168.77.2/24"),
            (h.node2.as_str(), "192.168.78.1/24", "192.168.78.2/24"),
        ] {
            let link = if peer == h.client {
                "vclient"
            } else {
                "vnode2"
            };
            run(&[
                "ip", "-n", n, "link", "add", link, "type", "veth", "peer", "name", "eth0",
                "netns", peer,
            ]);
            ns_run(n, &["ip", "addr", "add", node_ip, "dev", link]);
            ns_run(n, &["ip", "link", "set", link, "up"]);
            ns_run(peer, &["ip", "addr", "add", peer_ip, "dev", "eth0"]);
            ns_run(peer, &["ip", "link", "set", "eth0", "up"]);
        }
        ns_run(
            &h.client,
            &["ip", "route", "add", "10.96.0.0/16", "via", "192.168.77.1"],
        );
        ns_run(
            &h.client,
            &[
                "ip",
                "route",
                "add",
                "192.168.99.0/24",
                "via",
                "192.168.77.1",
            ],
        );
        h
    }

    pub fn node_path(&self) -> std::path::PathBuf {
        netns_path(&self.node).into()
    }

    /// Runs a command inside the node namespace (e.g. to flush its rules).
    pub fn on_node(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", self.node.as_str()];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in [&self.node, &self.node2, &self.client]
            .into_iter()
            .chain(self.pods.iter())
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
