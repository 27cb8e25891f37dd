//! `scripts/bench netpol`: a node with 100 policies over 1,000 pods (10 namespaces x 100; two of
//! them real test hosts on the node's bridge, the rest addresses only). Figures, each beside its
//! floor in the same run:
//! - full load: compile + render + `nft -f`, beside `nft -f` of the same text alone;
//! - one pod added (median of 21): compile + diff + `nft -f`, beside the same diff text alone;
//! - TCP connections/s from the client pod to the server pod (both isolated, allowed by the last
//!   policies their chains try), beside the same traffic with no policy table: rounds taken in
//!   turn (ABABAB), medians. NETPOL_BENCH_POLICIES=N keeps only the first N policies.
//!
//! Usage: netpol_bench [seconds per traffic round, default 3] (root; test hosts only).

use keelson_testing::median;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::networking::v1::NetworkPolicy;
use keelson_netpol::compile::compile;
use keelson_netpol::from_k8s::{NamedPort, NamespaceInfo, PodInfo};
use keelson_netpol::nft::{Nft, NftCli};
use keelson_netpol::ruleset::{render_diff, render_full};
use keelson_testing::TestHost;
use serde_json::json;

const NODE: &str = "bench";
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 3);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 2);

fn pod(ns: usize, i: usize, ip: Ipv4Addr) -> PodInfo {
    PodInfo {
        namespace: format!("ns{ns}"),
        name: format!("p{i}"),
        labels: [("app".to_string(), format!("a{}", i % 10))].into(),
        ip,
        node: if i.is_multiple_of(4) {
            NODE.into()
        } else {
            "other".into()
        },
        ports: vec![NamedPort {
            name: "http".into(),
            protocol: "TCP".into(),
            port: 8080,
        }],
    }
}

/// 1,000 pods: pod i of namespace n at 10.244.(n+1).(i+1); the server (ns0, app a0) and client
/// (ns1, app a1) are the two real ones.
fn pods() -> Vec<PodInfo> {
    let mut out = Vec::new();
    for n in 0..10 {
        for i in 0..100 {
            out.push(pod(n, i, Ipv4Addr::new(10, 244, n as u8 + 1, i as u8 + 1)));
        }
    }
    out[0].ip = SERVER;
    out[0].node = NODE.into();
    out[101].ip = CLIENT;
    out[101].node = NODE.into();
    out
}

/// 10 policies per namespace: ingress to app a<k> from app a<k+1> of the next namespace on
/// 8080; every third also an egress policy to the previous namespace on the named port; plus
/// one ipBlock policy per namespace selecting every pod.
fn policies() -> Vec<NetworkPolicy> {
    let mut out = Vec::new();
    for n in 0..10 {
        for k in 0..9 {
            let mut spec = json!({
                "podSelector": {"matchLabels": {"app": format!("a{k}")}},
                "ingress": [{"from": [{
                    "namespaceSelector": {"matchLabels": {"name": format!("ns{}", (n + 1) % 10)}},
                    "podSelector": {"matchLabels": {"app": format!("a{}", (k + 1) % 10)}}}],
                    "ports": [{"port": 8080}]}]});
            if k % 3 == 1 {
                spec["policyTypes"] = json!(["Ingress", "Egress"]);
                spec["egress"] = json!([{"to": [{"namespaceSelector": {"matchLabels":
                    {"name": format!("ns{}", (n + 9) % 10)}}}], "ports": [{"port": "http"}]}]);
            }
            out.push(policy(n, &format!("p{k}"), spec));
        }
        out.push(policy(
            n,
            "blocks",
            json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock":
                {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}], "ports": [{"port": 443}]}]}),
        ));
    }
    out
}

fn policy(ns: usize, name: &str, spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(
        json!({"metadata": {"namespace": format!("ns{ns}"), "name": name}, "spec": spec}),
    )
    .expect("policy")
}

fn namespaces() -> Vec<NamespaceInfo> {
    (0..10)
        .map(|n| NamespaceInfo {
            name: format!("ns{n}"),
            labels: [("name".to_string(), format!("ns{n}"))].into(),
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Connections per second from `client` to the server for `secs`, 4 at a time.
fn rate(client: &TestHost, secs: f64) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let path = client.path();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (count, path) = (count.clone(), path.clone());
            std::thread::spawn(move || {
                let f = std::fs::File::open(&path).expect("netns");
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                while Instant::now() < end {
                    let to = SocketAddr::from((SERVER, 8080));
                    if let Ok(c) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
                        abort(c);
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    count.load(Ordering::Relaxed) as f64 / secs
}

/// Closes with a reset (SO_LINGER 0): no TIME_WAIT on either side, so the client's ports are
/// free again at once and a reused port never meets the server's TIME_WAIT (whose answer costs
/// the client a one-second SYN retransmission and would swamp the figure).
fn abort(c: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a pointer to a linger struct of the size given.
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

fn line(figure: &str, value: f64, unit: &str, floor_name: &str, floor: f64) {
    println!(
        "{figure:<48} {value:>10.2} {unit:<7} | {floor_name}: {floor:.2} ({:.2}x)",
        value / floor
    );
    println!(
        "{}",
        json!({"bench": "netpol", "figure": figure, "value": value, "unit": unit,
               "baseline": {"name": floor_name, "value": floor}})
    );
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let node = TestHost::create("npb-node");
    node.sysctl("net.ipv4.ip_forward=1");
    node.sysctl("net.bridge.bridge-nf-call-iptables=1");
    node.ip(&["link", "add", "br0", "type", "bridge"]);
    node.ip(&["addr", "add", "10.244.0.1/16", "dev", "br0"]);
    node.ip(&["link", "set", "br0", "up"]);
    let mut hosts = Vec::new();
    for (name, ip) in [("server", SERVER), ("client", CLIENT)] {
        let h = TestHost::create(&format!("npb-{name}"));
        node.ip(&[
            "link",
            "add",
            &format!("v{name}"),
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &h.name,
        ]);
        node.ip(&["link", "set", &format!("v{name}"), "master", "br0", "up"]);
        h.ip(&["addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
        h.ip(&["link", "set", "eth0", "up"]);
        hosts.push(h);
    }
    let listener = hosts[0].run_in(|| TcpListener::bind(("0.0.0.0", 8080)).expect("bind"));
    // Blocking accepts: a server that polls lets its backlog fill, and each SYN dropped then
    // costs its client a one-second retransmission (a figure of the server, not of policy).
    // The threads end with the process.
    let listener = Arc::new(listener);
    for _ in 0..2 {
        let l = listener.clone();
        std::thread::spawn(move || loop {
            if let Ok((c, _)) = l.accept() {
                drop(c);
            }
        });
    }
    let nft = NftCli {
        netns: Some(node.path()),
    };
    let (mut pods, nss, mut pols) = (pods(), namespaces(), policies());
    if let Some(n) = std::env::var("NETPOL_BENCH_POLICIES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        pols.truncate(n);
    }

    // Full load.
    let t = Instant::now();
    let compiled = compile(NODE, &pols, &pods, &nss);
    let text = render_full(&compiled.ruleset);
    nft.load(&text).expect("full load");
    let full = ms(t.elapsed());
    let t = Instant::now();
    nft.load(&text).expect("full load again");
    let raw_full = ms(t.elapsed());
    eprintln!(
        "ruleset: {} rules, {} set elements, {} problems",
        compiled.ruleset.rule_count(),
        compiled.ruleset.element_count(),
        compiled.problems.len()
    );
    line(
        "full load, 100 policies / 1,000 pods",
        full,
        "ms",
        "nft -f same text",
        raw_full,
    );

    // One pod more, 21 times (each a new address on this node in ns0 with app a0).
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let mut loaded = compiled.ruleset;
    for i in 0..21u8 {
        let t = Instant::now();
        pods.push(pod(0, 0, Ipv4Addr::new(10, 244, 200, i + 1)));
        if let Some(last) = pods.last_mut() {
            last.node = NODE.into();
        }
        let next = compile(NODE, &pols, &pods, &nss).ruleset;
        let diff = render_diff(&loaded, &next).expect("a change");
        nft.load(&diff).expect("incremental load");
        ours.push(ms(t.elapsed()));
        // The floor: the same elements deleted and added again by nft alone.
        let undo = render_diff(&next, &loaded).expect("undo");
        nft.load(&undo).expect("undo");
        let t = Instant::now();
        nft.load(&diff).expect("raw load");
        raw.push(ms(t.elapsed()));
        loaded = next;
    }
    line(
        "one pod added (median of 21)",
        median(ours),
        "ms",
        "nft -f same diff",
        median(raw),
    );

    // Traffic, ABAB: no table (floor) and the 100 policies.
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let full_text = render_full(&loaded);
    for _ in 0..3 {
        nft.load("add table inet keelson-netpol\ndelete table inet keelson-netpol\n")
            .expect("remove");
        without.push(rate(&hosts[1], secs));
        nft.load(&full_text).expect("load");
        with.push(rate(&hosts[1], secs));
    }
    // Every connection is allowed: a dropped packet here would mean retransmissions, not cost.
    let drops = node.sh_ok(
        "nft list chain inet keelson-netpol ingress; nft list chain inet keelson-netpol egress",
    );
    eprintln!("drop counters after the last round:");
    for l in drops.lines().filter(|l| l.contains("drop")) {
        eprintln!("  {}", l.trim());
    }
    let _ = std::io::stdout().flush();
    line(
        "TCP connections/s through 100 policies",
        median(with),
        "conn/s",
        "no policy",
        median(without),
    );
}
