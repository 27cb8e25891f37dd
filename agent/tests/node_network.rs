//! The agent's node network code driven directly in test hosts (no API server, no containerd):
//! three nodes, a and b on one segment (a bridge in a router host), c behind that router; each
//! node has a "pod" (a test host on a veth, an address from the node's pod CIDR). The Node
//! objects are built here as the API would hold them.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus};
use keelson_agent::node::network::{self, vxlan, Backend, NetworkConfig};
use keelson_apimachinery::well_known::{BACKEND_TYPE_ANNOTATION, VXLAN_VTEP_MAC_ANNOTATION};
use keelson_netlink::link::format_mac;
use keelson_testing::{require_root_and_tools, TestHost};

/// One node: its host, its pod's host, its InternalIP and pod CIDR index (10.244.<n>.0/24).
struct TestNode {
    name: &'static str,
    ip: &'static str,
    n: u8,
    host: TestHost,
    pod: TestHost,
}

impl TestNode {
    fn pod_cidr(&self) -> String {
        format!("10.244.{}.0/24", self.n)
    }
    fn pod_ip(&self) -> String {
        format!("10.244.{}.2", self.n)
    }
}

struct Net {
    /// Kept for its lifetime: the router between the two segments.
    _router: TestHost,
    nodes: Vec<TestNode>,
}

/// r: bridge `seg` (172.30.1.1/24) with a (.2) and b (.3); link to c on 172.30.2.0/24 (c .2).
fn network(prefix: &str) -> Net {
    require_root_and_tools(&["ip", "nsenter", "bridge", "sysctl"]);
    let r = TestHost::create(&format!("{prefix}r"));
    r.sysctl("net.ipv4.ip_forward=1");
    r.ip(&["link", "add", "seg", "type", "bridge"]);
    r.ip(&["addr", "add", "172.30.1.1/24", "dev", "seg"]);
    r.ip(&["link", "set", "seg", "up"]);
    let mut nodes = Vec::new();
    for (name, ip, n) in [
        ("a", "172.30.1.2", 1),
        ("b", "172.30.1.3", 2),
        ("c", "172.30.2.2", 3),
    ] {
        let host = TestHost::create(&format!("{prefix}{name}"));
        host.sysctl("net.ipv4.ip_forward=1");
        if name == "c" {
            r.veth("toc", "172.30.2.1/24", &host, "up0", &format!("{ip}/24"));
            host.ip(&["route", "add", "172.30.1.0/24", "via", "172.30.2.1"]);
        } else {
            let port = format!("to{name}");
            r.ip(&[
                "link", "add", &port, "type", "veth", "peer", "name", "up0", "netns", &host.name,
            ]);
            r.ip(&["link", "set", &port, "master", "seg", "up"]);
            host.ip(&["addr", "add", &format!("{ip}/24"), "dev", "up0"]);
            host.ip(&["link", "set", "up0", "up"]);
            host.ip(&["route", "add", "172.30.2.0/24", "via", "172.30.1.1"]);
        }
        // The pod: a veth from the node's pod CIDR, routed to the cluster CIDR via the node.
        let pod = TestHost::create(&format!("{prefix}{name}p"));
        let gw = format!("10.244.{n}.1");
        host.veth(
            "kpod",
            &format!("{gw}/24"),
            &pod,
            "eth0",
            &format!("10.244.{n}.2/24"),
        );
        pod.ip(&["route", "add", "10.244.0.0/16", "via", &gw]);
        nodes.push(TestNode {
            name,
            ip,
            n,
            host,
            pod,
        });
    }
    Net { _router: r, nodes }
}

fn node_object(n: &TestNode, vtep_mac: Option<&str>) -> Node {
    let mut node = Node {
        metadata: kube::api::ObjectMeta {
            name: Some(n.name.to_string()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(n.pod_cidr()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: n.ip.into(),
            }]),
            ..Default::default()
        }),
    };
    if let Some(mac) = vtep_mac {
        node.metadata.annotations = Some(
            [
                (BACKEND_TYPE_ANNOTATION.to_string(), "vxlan".to_string()),
                (VXLAN_VTEP_MAC_ANNOTATION.to_string(), mac.to_string()),
            ]
            .into(),
        );
    }
    node
}

fn config(backend: Backend, direct_routing: bool) -> NetworkConfig {
    NetworkConfig {
        backend,
        direct_routing,
        cluster_cidr: "10.244.0.0/16".parse().unwrap(),
    }
}

/// `network::prepare` in the node's host.
fn prepare(n: &TestNode, backend: Backend) -> Option<vxlan::Vtep> {
    let ip: Ipv4Addr = n.ip.parse().unwrap();
    let cidr = n.pod_cidr().parse().unwrap();
    n.host
        .run_in(move || network::prepare(ip.into(), cidr, backend))
        .unwrap_or_else(|e| panic!("prepare on {}: {e}", n.name))
}

/// One sync in the node's host; returns the nodes refused (name -> why).
fn sync(
    n: &TestNode,
    nodes: &[Node],
    cfg: NetworkConfig,
    vtep: Option<u32>,
) -> std::collections::BTreeMap<String, String> {
    sync_counted(n, nodes, cfg, vtep).0
}

/// One sync in the node's host; returns the nodes refused and the number of changes.
fn sync_counted(
    n: &TestNode,
    nodes: &[Node],
    cfg: NetworkConfig,
    vtep: Option<u32>,
) -> (std::collections::BTreeMap<String, String>, usize) {
    let (nodes, me) = (nodes.to_vec(), n.name);
    let (want, changes) = n
        .host
        .run_in(move || network::sync_nodes(&nodes, me, &cfg, vtep))
        .unwrap_or_else(|e| panic!("sync on {}: {e}", n.name));
    (want.refused, changes)
}

/// Listens on the pod's address and returns the address of the first client seen.
fn listen(pod: &TestNode, port: u16) -> JoinHandle<String> {
    let addr: SocketAddr = format!("{}:{port}", pod.pod_ip()).parse().unwrap();
    let listener = pod
        .pod
        .run_in(move || TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}")));
    std::thread::spawn(move || {
        let (mut conn, peer) = listener.accept().expect("accept");
        let mut buf = [0u8; 5];
        conn.read_exact(&mut buf).expect("read");
        conn.write_all(&buf).expect("echo");
        peer.ip().to_string()
    })
}

/// A TCP round trip from one node's pod to another's: Ok(address the server saw).
fn pod_to_pod(from: &TestNode, to: &TestNode, port: u16) -> Result<String, String> {
    let server = listen(to, port);
    let addr: SocketAddr = format!("{}:{port}", to.pod_ip()).parse().unwrap();
    let sent = from.pod.run_in(move || -> Result<(), String> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))
            .map_err(|e| e.to_string())?;
        s.write_all(b"hello").map_err(|e| e.to_string())?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf)
            .map_err(|e| format!("echo from {addr}: {e}"))?;
        Ok(())
    });
    match sent {
        // Unblock the listener so its thread ends.
        Err(e) => {
            let _ = to
                .pod
                .run_in(move || TcpStream::connect_timeout(&addr, Duration::from_secs(1)));
            let _ = server.join();
            Err(e)
        }
        Ok(()) => Ok(server.join().expect("server thread")),
    }
}

fn route(n: &TestNode, dst: &str) -> String {
    n.host.ip(&["-4", "route", "show", dst])
}

/// `bridge fdb show` of the node's vxlan device.
fn vxlan_fdb(n: &TestNode) -> String {
    let out = n
        .host
        .command("bridge")
        .args(["fdb", "show", "dev", vxlan::DEVICE])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn host_gw_reaches_the_peer_on_its_segment_and_refuses_the_routed_one() {
    let net = network("nnh");
    let [a, b, c] = [&net.nodes[0], &net.nodes[1], &net.nodes[2]];
    let nodes: Vec<Node> = net.nodes.iter().map(|n| node_object(n, None)).collect();
    let cfg = config(Backend::HostGw, false);
    for n in &net.nodes {
        assert_eq!(prepare(n, Backend::HostGw), None);
    }
    let refused = sync(a, &nodes, cfg, None);
    assert_eq!(
        refused.get("c").map(String::as_str),
        Some("InternalIP 172.30.2.2 is not on this node's L2 segment; use --network-backend vxlan")
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    sync(b, &nodes, cfg, None);
    let r = route(a, "10.244.2.0/24");
    assert!(r.contains("via 172.30.1.3 dev up0 proto 252"), "{r}");
    assert_eq!(route(a, "10.244.3.0/24"), "");
    assert_eq!(pod_to_pod(a, b, 7101), Ok(a.pod_ip()));
    let err = pod_to_pod(a, c, 7102).unwrap_err();
    assert!(err.contains("unreachable"), "{err}");
}

#[test]
fn vxlan_reaches_the_routed_peer_keeps_the_source_and_forgets_a_removed_peer() {
    let net = network("nnv");
    let [a, b, c] = [&net.nodes[0], &net.nodes[1], &net.nodes[2]];
    let cfg = config(Backend::Vxlan, true);
    let vteps: Vec<vxlan::Vtep> = net
        .nodes
        .iter()
        .map(|n| prepare(n, Backend::Vxlan).expect("a VTEP"))
        .collect();
    let macs: Vec<String> = vteps.iter().map(|v| format_mac(&v.mac)).collect();
    let link = a.host.ip(&["-d", "link", "show", vxlan::DEVICE]);
    for part in [
        "mtu 1450",
        "vxlan id 1 local 172.30.1.2 dev up0",
        "dstport 8472",
        "nolearning",
    ] {
        assert!(link.contains(part), "{part} in {link}");
    }
    let addr = a.host.ip(&["-4", "addr", "show", "dev", vxlan::DEVICE]);
    assert!(addr.contains("inet 10.244.1.0/32"), "{addr}");
    let nodes: Vec<Node> = net
        .nodes
        .iter()
        .zip(&macs)
        .map(|(n, mac)| node_object(n, Some(mac)))
        .collect();
    for (n, v) in net.nodes.iter().zip(&vteps) {
        assert!(sync(n, &nodes, cfg, Some(v.index)).is_empty());
    }
    // What the kernel reports reads back as what was wanted: a second sync changes nothing.
    assert_eq!(sync_counted(a, &nodes, cfg, Some(vteps[0].index)).1, 0);
    // DirectRouting: b is on a's segment, c goes through the overlay.
    let to_b = route(a, "10.244.2.0/24");
    assert!(to_b.contains("via 172.30.1.3 dev up0 proto 252"), "{to_b}");
    let to_c = route(a, "10.244.3.0/24");
    assert!(
        to_c.contains("via 10.244.3.0 dev keelson.1 proto 252 onlink"),
        "{to_c}"
    );
    let neigh = a.host.ip(&["neigh", "show", "dev", vxlan::DEVICE]);
    assert!(
        neigh.contains(&format!("10.244.3.0 lladdr {} PERMANENT", macs[2])),
        "{neigh}"
    );
    let fdb = vxlan_fdb(a);
    assert!(
        fdb.contains(&format!("{} dst 172.30.2.2 self permanent", macs[2])),
        "{fdb}"
    );

    assert_eq!(
        pod_to_pod(a, c, 7201),
        Ok(a.pod_ip()),
        "a's pod to c's over vxlan"
    );
    assert_eq!(
        pod_to_pod(c, a, 7202),
        Ok(c.pod_ip()),
        "c's pod to a's over vxlan"
    );
    assert_eq!(
        pod_to_pod(a, b, 7203),
        Ok(a.pod_ip()),
        "a's pod to b's directly"
    );

    // A restart adopts the device (same MAC, so peers' entries stay right), and a sync
    // without c removes c's route, neighbour and FDB entry.
    assert_eq!(prepare(a, Backend::Vxlan), Some(vteps[0]));
    let without_c: Vec<Node> = nodes[..2].to_vec();
    sync(a, &without_c, cfg, Some(vteps[0].index));
    assert_eq!(route(a, "10.244.3.0/24"), "");
    assert_eq!(a.host.ip(&["neigh", "show", "dev", vxlan::DEVICE]), "");
    let fdb = vxlan_fdb(a);
    assert!(!fdb.contains("dst 172.30.2.2"), "{fdb}");
    assert!(pod_to_pod(a, c, 7204).is_err());
    // b's route is untouched.
    assert!(route(a, "10.244.2.0/24").contains("via 172.30.1.3"));

    // Back to host-gw: the vxlan device of the earlier run is removed.
    assert_eq!(prepare(a, Backend::HostGw), None);
    assert!(
        !a.host.links().iter().any(|l| l == vxlan::DEVICE),
        "{:?}",
        a.host.links()
    );
}

#[test]
fn state_left_by_an_earlier_run_is_reconciled_at_start() {
    require_root_and_tools(&["ip", "nsenter"]);
    let host = TestHost::create("nns");
    // The uplink: one end of a veth pair (this kernel has no dummy links), a jumbo MTU.
    host.ip(&[
        "link", "add", "up0", "mtu", "9000", "type", "veth", "peer", "name", "up0p", "mtu", "9000",
    ]);
    host.ip(&["addr", "add", "172.30.5.2/24", "dev", "up0"]);
    host.ip(&["link", "set", "up0", "up"]);
    // An earlier run's device made otherwise (another VNI, learning), and a route of ours to a
    // node that has gone since; plus a route of someone else's, which must stay.
    host.ip(&[
        "link",
        "add",
        "keelson.1",
        "type",
        "vxlan",
        "id",
        "42",
        "local",
        "172.30.5.2",
        "dev",
        "up0",
        "dstport",
        "8472",
    ]);
    host.ip(&[
        "route",
        "add",
        "10.244.9.0/24",
        "via",
        "172.30.5.9",
        "proto",
        "252",
    ]);
    host.ip(&["route", "add", "10.244.10.0/24", "via", "172.30.5.10"]);

    let cidr = "10.244.4.0/24".parse().unwrap();
    let ip: Ipv4Addr = "172.30.5.2".parse().unwrap();
    let vtep = host
        .run_in(move || network::prepare(ip.into(), cidr, Backend::Vxlan))
        .expect("prepare")
        .expect("a VTEP");
    let link = host.ip(&["-d", "link", "show", vxlan::DEVICE]);
    assert!(
        link.contains("vxlan id 1 local 172.30.5.2 dev up0"),
        "{link}"
    );
    assert!(
        link.contains("nolearning") && link.contains("mtu 8950"),
        "{link}"
    );
    let index = vtep.index;
    let (want, changes) = host
        .run_in(move || network::sync_nodes(&[], "me", &config(Backend::Vxlan, false), Some(index)))
        .expect("sync");
    assert_eq!((want.routes.len(), changes), (0, 1));
    assert_eq!(host.ip(&["-4", "route", "show", "10.244.9.0/24"]), "");
    let theirs = host.ip(&["-4", "route", "show", "10.244.10.0/24"]);
    assert!(theirs.contains("via 172.30.5.10"), "{theirs}");
}
