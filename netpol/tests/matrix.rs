//! Upstream's NetworkPolicy probe matrix, reduced (root): three namespaces x three pods on one
//! node's bridge (test hosts), TCP servers in every pod, and every pair probed after each policy
//! change. The rules are compiled by the library and loaded by the same Syncer the daemon runs,
//! so every change after the first is an incremental load into the live table.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use keelson_netpol::app::Syncer;
use keelson_netpol::compile::compile;
use keelson_netpol::from_k8s::{NamedPort, NamespaceInfo, PodInfo};
use keelson_netpol::metrics::Metrics;
use keelson_netpol::nft::NftCli;
use keelson_testing::{require_root_and_tools, TestHost};
use serde_json::json;

const NODE: &str = "n1";
const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
/// Service addresses the node DNATs to x/a:80, as the proxy would: in nftables mode, and in
/// iptables mode (iptables-legacy here, a separate netfilter table of its own).
const CLUSTER_IP: &str = "10.96.0.10";
const CLUSTER_IP_IPTABLES: &str = "10.96.0.11";
/// An address of the node outside the pod network (as its InternalIP would be).
const NODE_OWN: Ipv4Addr = Ipv4Addr::new(192, 168, 100, 1);

struct Pod {
    info: PodInfo,
    host: TestHost,
}

struct Cluster {
    node: TestHost,
    pods: Vec<Pod>,
    stop: Arc<AtomicBool>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn ip_of(ns: usize, pod: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, 0, 10 + (ns * 3 + pod) as u8)
}

impl Cluster {
    fn new() -> Cluster {
        require_root_and_tools(&["ip", "nft", "nsenter", "iptables-legacy"]);
        let node = TestHost::create("netpol-node");
        node.sysctl("net.ipv4.ip_forward=1");
        node.ip(&["link", "add", "br0", "type", "bridge"]);
        node.ip(&["addr", "add", "10.244.0.1/24", "dev", "br0"]);
        node.ip(&["link", "set", "br0", "up"]);
        node.ip(&["addr", "add", &format!("{NODE_OWN}/32"), "dev", "lo"]);
        // Bridged pod-to-pod traffic must pass the forward hook, as on a node with br_netfilter.
        node.sysctl("net.bridge.bridge-nf-call-iptables=1");
        // The proxy's part, reduced to one Service: ClusterIP:80 -> x/a:80.
        node.sh_ok(&format!(
            "nft add table ip svc && nft add chain ip svc pre '{{ type nat hook prerouting priority -100 ; }}' \
             && nft add rule ip svc pre ip daddr {CLUSTER_IP} tcp dport 80 dnat to {}:80",
            ip_of(0, 0)
        ));
        node.sh_ok(&format!(
            "iptables-legacy -t nat -A PREROUTING -d {CLUSTER_IP_IPTABLES} -p tcp --dport 80 -j DNAT --to-destination {}:80",
            ip_of(0, 0)
        ));
        let stop = Arc::new(AtomicBool::new(false));
        // Something of the node's own for pods to reach (as a kubelet's port or DNS on the host).
        serve(&node, 9000, stop.clone());
        let mut pods = Vec::new();
        for (n, ns) in NAMESPACES.iter().enumerate() {
            for (p, name) in PODS.iter().enumerate() {
                let host = TestHost::create(&format!("netpol-{ns}{name}"));
                let port = format!("v{ns}{name}");
                node.ip(&[
                    "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                    &host.name,
                ]);
                node.ip(&["link", "set", &port, "master", "br0", "up"]);
                let ip = ip_of(n, p);
                host.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
                host.ip(&["link", "set", "eth0", "up"]);
                host.ip(&["route", "add", "10.96.0.0/16", "via", "10.244.0.1"]);
                host.ip(&[
                    "route",
                    "add",
                    &format!("{NODE_OWN}/32"),
                    "via",
                    "10.244.0.1",
                ]);
                for port in [80u16, 81] {
                    serve(&host, port, stop.clone());
                }
                let info = PodInfo {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    labels: [("app".to_string(), name.to_string())].into(),
                    ip,
                    node: NODE.into(),
                    ports: vec![
                        NamedPort {
                            name: "http".into(),
                            protocol: "TCP".into(),
                            port: 80,
                        },
                        NamedPort {
                            name: "alt".into(),
                            protocol: "TCP".into(),
                            port: 81,
                        },
                    ],
                };
                pods.push(Pod { info, host });
            }
        }
        Cluster { node, pods, stop }
    }

    fn namespaces() -> Vec<NamespaceInfo> {
        NAMESPACES
            .iter()
            .map(|n| NamespaceInfo {
                name: n.to_string(),
                labels: [("ns".to_string(), n.to_string())].into(),
            })
            .collect()
    }

    /// Every source pod to every pod (and to the ClusterIP) on `port`: "x/a->y/b" -> connected.
    fn probe(&self, port: u16) -> BTreeMap<String, bool> {
        let mut handles = Vec::new();
        for src in &self.pods {
            let mut targets: Vec<(String, Ipv4Addr)> = self
                .pods
                .iter()
                .map(|d| (format!("{}/{}", d.info.namespace, d.info.name), d.info.ip))
                .collect();
            // Not from x/a itself: hairpin needs the proxy's masquerade, which is not here.
            if port == 80 && src.info.ip != ip_of(0, 0) {
                targets.push(("svc".into(), CLUSTER_IP.parse().unwrap()));
                targets.push(("svc-iptables".into(), CLUSTER_IP_IPTABLES.parse().unwrap()));
            }
            for (dst, ip) in targets {
                let key = format!("{}/{}->{dst}", src.info.namespace, src.info.name);
                let path = src.host.path();
                handles.push(std::thread::spawn(move || {
                    let f = std::fs::File::open(&path).unwrap();
                    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                    let ok = TcpStream::connect_timeout(
                        &SocketAddr::from((ip, port)),
                        Duration::from_millis(700),
                    )
                    .is_ok();
                    (key, ok)
                }));
            }
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    /// Probes and compares with `allowed(src_ns, src_pod, dst_ns, dst_pod)` ("svc" is x/a).
    fn expect(&self, case: &str, port: u16, allowed: impl Fn(&str, &str, &str, &str) -> bool) {
        let got = self.probe(port);
        let mut wrong = Vec::new();
        for (key, ok) in &got {
            let (src, dst) = key.split_once("->").unwrap();
            let dst = if dst.starts_with("svc") { "x/a" } else { dst };
            let (sn, sp) = src.split_once('/').unwrap();
            let (dn, dp) = dst.split_once('/').unwrap();
            // A pod reaching itself never leaves it: no policy applies.
            let want = src == dst && !key.contains("->svc") || allowed(sn, sp, dn, dp);
            if *ok != want {
                wrong.push(format!(
                    "{key}:{port} {} (want {})",
                    verdict(*ok),
                    verdict(want)
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "{case}: {} of {} probes wrong:\n  {}\nrules:\n{}",
            wrong.len(),
            got.len(),
            wrong.join("\n  "),
            self.node
                .sh("nft list table inet keelson-netpol")
                .stdout
                .escape_ascii()
        );
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "connected"
    } else {
        "blocked"
    }
}

/// Whether `from` connects to `to` on TCP (a second at most).
fn connects(from: &TestHost, to: SocketAddr) -> bool {
    from.run_in(move || TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok())
}

fn serve(host: &TestHost, port: u16, stop: Arc<AtomicBool>) {
    let l = host.run_in(move || TcpListener::bind(("0.0.0.0", port)).expect("bind"));
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match l.accept() {
                Ok((s, _)) => drop(s),
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

#[test]
fn probe_matrix_through_policy_changes() {
    let c = Cluster::new();
    let pods: Vec<PodInfo> = c.pods.iter().map(|p| p.info.clone()).collect();
    let nss = Cluster::namespaces();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Arc::new(Metrics::new(&mut registry));
    let nft = NftCli {
        netns: Some(c.node.path()),
    };
    let mut syncer = Syncer::new(Box::new(nft), metrics, Duration::from_secs(3600));
    let mut load = |policies: &[NetworkPolicy]| {
        let compiled = compile(NODE, policies, &pods, &nss);
        assert!(compiled.problems.is_empty(), "{:?}", compiled.problems);
        syncer.sync(compiled).expect("nft load");
    };

    load(&[]);
    c.expect("no policy", 80, |_, _, _, _| true);

    let deny_x = policy("x", "deny", json!({"podSelector": {}}));
    load(std::slice::from_ref(&deny_x));
    c.expect("default-deny ingress in x", 80, |_, _, dn, _| dn != "x");
    // The node itself (kubelet probes, host services) is not judged by policy.
    assert!(
        connects(&c.node, SocketAddr::from((ip_of(0, 1), 80))),
        "the node reaches an isolated pod"
    );

    let from_y = policy(
        "x",
        "from-y",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}),
    );
    load(&[deny_x.clone(), from_y]);
    c.expect("allow from namespace y", 80, |sn, _, dn, _| {
        dn != "x" || sn == "y"
    });

    let b_to_a = policy(
        "x",
        "b-to-a",
        json!({"podSelector": {"matchLabels": {"app": "a"}},
               "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "b"}}}]}]}),
    );
    load(std::slice::from_ref(&b_to_a));
    c.expect("allow from pod label", 80, |sn, sp, dn, dp| {
        !(dn == "x" && dp == "a") || (sn == "x" && sp == "b")
    });

    let egress = policy(
        "y",
        "egress",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
               "egress": [{"to": [{"ipBlock": {"cidr": "10.244.0.0/24", "except": [format!("{}/32", ip_of(0, 0))]}}]}]}),
    );
    load(&[egress]);
    // An egress-isolated pod still reaches its node, even at an address no rule allows
    // (traffic to the node goes through input, which policy leaves alone).
    assert!(
        connects(&c.pods[3].host, SocketAddr::from((NODE_OWN, 9000))),
        "an egress-isolated pod reaches its node"
    );
    c.expect("egress ipBlock with except", 80, |sn, _, dn, dp| {
        !(sn == "y" && dn == "x" && dp == "a")
    });

    let named = policy(
        "x",
        "named",
        json!({"podSelector": {"matchLabels": {"app": "a"}},
               "ingress": [{"ports": [{"port": "http"}]}]}),
    );
    load(std::slice::from_ref(&named));
    c.expect("named port: http open", 80, |_, _, _, _| true);
    c.expect("named port: alt closed", 81, |_, _, dn, dp| {
        !(dn == "x" && dp == "a")
    });

    let range = policy(
        "x",
        "range",
        json!({"podSelector": {"matchLabels": {"app": "a"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}],
                            "ports": [{"port": 81, "endPort": 90}]}]}),
    );
    load(&[named, range]);
    c.expect("union with an endPort range", 81, |sn, _, dn, dp| {
        !(dn == "x" && dp == "a") || sn == "z"
    });

    load(&[]);
    c.expect("every policy removed", 80, |_, _, _, _| true);
    let tables = c.node.sh_ok("nft list tables");
    assert!(
        !tables.contains("keelson-netpol"),
        "table left behind: {tables}"
    );
}
