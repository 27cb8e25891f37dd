//! Packet-flow tests (root): rules loaded by the real backends into a test host's node
//! namespace, exercised with real TCP/UDP connections from other test hosts.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    answers, dump, hammer, tcp_answer, tcp_hits, tcp_once, udp_on, udp_once, Hosts, Servers,
    NODE_IP, POD_IPS,
};
use keelson_daemon::{Changes, Shutdown};
use keelson_proxy::app::{make_backend, IptablesVariant, ProxyMode};
use keelson_proxy::exec::CommandRunner;
use keelson_proxy::metrics::Metrics;
use keelson_proxy::model::{Endpoint, Protocol, ProxyModel, ServicePort, ServicePortName};
use keelson_proxy::proxier::Proxier;
use keelson_proxy::sync_loop::{run_sync_loop, LoopConfig, StaticSource};
use keelson_testing::{eventually, TestHost};

const WEB: &str = "10.96.0.10";
const STICKY: &str = "10.96.0.20";
const EMPTY: &str = "10.96.0.50";
const DNS: &str = "10.96.0.53";
const LOCAL: &str = "10.96.0.30";

fn ep(ip: &str, port: u16, ready: bool) -> Endpoint {
    Endpoint {
        ip: ip.parse().expect("ip"),
        port,
        ready,
        serving: ready,
        terminating: false,
        local: true,
    }
}

fn svc(name: &str, ip: &str, port: u16, proto: Protocol, eps: Vec<Endpoint>) -> ServicePort {
    let name = ServicePortName {
        namespace: "default".into(),
        name: name.into(),
        port_name: String::new(),
        protocol: proto,
    };
    ServicePort::plain(name, ip.parse().expect("ip"), port, eps)
}

/// The services every test loads: web (two pods on different target ports, like a named port
/// resolving per pod, plus a NodePort), sticky (ClientIP affinity), empty (no endpoints, with a
/// NodePort), dns (UDP).
fn model(pod2_ready: bool) -> ProxyModel {
    let mut web = svc(
        "web",
        WEB,
        80,
        Protocol::Tcp,
        vec![ep(POD_IPS[0], 8080, true), ep(POD_IPS[1], 8081, pod2_ready)],
    );
    web.node_port = Some(30080);
    let mut sticky = svc(
        "sticky",
        STICKY,
        80,
        Protocol::Tcp,
        vec![ep(POD_IPS[0], 8080, true), ep(POD_IPS[1], 8081, true)],
    );
    sticky.affinity_timeout = Some(600);
    let mut empty = svc("empty", EMPTY, 80, Protocol::Tcp, vec![]);
    empty.node_port = Some(30100);
    let dns = svc(
        "dns",
        DNS,
        53,
        Protocol::Udp,
        vec![ep(POD_IPS[0], 5353, true), ep(POD_IPS[1], 5353, true)],
    );
    // Both traffic policies Local; pod2 counts as running on another node.
    let mut remote = ep(POD_IPS[1], 8081, true);
    remote.local = false;
    let mut local = svc(
        "local",
        LOCAL,
        80,
        Protocol::Tcp,
        vec![ep(POD_IPS[0], 8080, true), remote],
    );
    local.node_port = Some(30090);
    local.internal_local = true;
    local.external_local = true;
    let mut m = ProxyModel {
        node_name: "node".into(),
        node_ips: vec![NODE_IP.parse().expect("ip")],
        services: BTreeMap::new(),
    };
    for s in [web, sticky, empty, dns, local] {
        m.services.insert(s.name.clone(), s);
    }
    m
}

fn addr(ip: &str, port: u16) -> SocketAddr {
    format!("{ip}:{port}").parse().expect("addr")
}

struct Env {
    hosts: Hosts,
    _servers: Vec<Servers>,
}

fn env() -> Env {
    let hosts = Hosts::new();
    let servers = vec![
        Servers::start(&hosts.pods[0], "pod1", &[8080], &[5353]),
        Servers::start(&hosts.pods[1], "pod2", &[8081], &[5353]),
    ];
    Env {
        hosts,
        _servers: servers,
    }
}

fn proxier(mode: ProxyMode, variant: IptablesVariant, hosts: &Hosts) -> Proxier {
    let netns = Some(hosts.node.path());
    let backend = make_backend(
        mode,
        variant,
        Some("10.244.0.0/16".parse().expect("cidr")),
        &netns,
    )
    .expect("backend");
    let conntrack = CommandRunner::in_netns(&hosts.node.path()).expect("netns runner");
    Proxier::new(
        backend,
        Some(Box::new(conntrack)),
        Arc::new(Metrics::new(Duration::from_secs(60))),
    )
}

fn assert_spread(hits: &BTreeMap<String, usize>, total: usize, what: &str) {
    for pod in ["pod1", "pod2"] {
        let n = hits.get(pod).copied().unwrap_or(0);
        assert!(
            n * 4 >= total,
            "{what}: {pod} got {n} of {total} (< 25%): {hits:?}"
        );
    }
    assert_eq!(hits.values().sum::<usize>(), total);
}

/// 200 connections to the ClusterIP (and UDP datagrams) reach both backends.
fn cluster_ip_spread(mode: ProxyMode, variant: IptablesVariant) {
    let e = env();
    let mut p = proxier(mode, variant, &e.hosts);
    p.sync(model(true), true).expect("sync");
    let hits = tcp_hits(&e.hosts.client, addr(WEB, 80), 200);
    assert_spread(&hits, 200, "cluster IP");
    let udp = answers(&e.hosts.client, addr(DNS, 53), 40, udp_once);
    assert!(
        udp.contains_key("pod1") && udp.contains_key("pod2"),
        "UDP spread: {udp:?}"
    );
    assert_eq!(udp.values().sum::<usize>(), 40);
}

/// NodePort from another test host: masqueraded (pods see the node's address) and spread;
/// with externalTrafficPolicy Local only this node's endpoint answers and sees the client's
/// own address; internalTrafficPolicy Local keeps cluster-IP traffic on this node too.
fn node_port_from_other_host(mode: ProxyMode) {
    let e = env();
    let mut p = proxier(mode, IptablesVariant::Nft, &e.hosts);
    p.sync(model(true), true).expect("sync");
    let hits = tcp_hits(&e.hosts.node2, addr(NODE_IP, 30080), 200);
    assert_spread(&hits, 200, "NodePort");
    let seen = answers(&e.hosts.node2, addr(NODE_IP, 30080), 20, tcp_answer);
    assert!(
        seen.keys().all(|k| k.ends_with(" 10.244.1.1")),
        "not masqueraded: {seen:?}"
    );

    let local = answers(&e.hosts.node2, addr(NODE_IP, 30090), 40, tcp_answer);
    assert_eq!(
        local.get("pod1 192.168.78.2"),
        Some(&40),
        "externalTrafficPolicy Local: {local:?}"
    );
    // Pods and the node itself are not outside clients: they reach every endpoint (pod2 also
    // itself, through the hairpin masquerade).
    for (who, ns) in [("pod2", &e.hosts.pods[1]), ("node", &e.hosts.node)] {
        let hits = tcp_hits(ns, addr(NODE_IP, 30090), 60);
        assert!(
            hits.contains_key("pod1")
                && hits.contains_key("pod2")
                && hits.values().sum::<usize>() == 60,
            "externalTrafficPolicy Local from {who}: {hits:?}"
        );
    }
    let internal = tcp_hits(&e.hosts.client, addr(LOCAL, 80), 40);
    assert_eq!(
        internal.get("pod1"),
        Some(&40),
        "internalTrafficPolicy Local: {internal:?}"
    );
}

/// A pod reaches itself through its own Service; a Service without endpoints refuses at once.
fn hairpin_and_reject(mode: ProxyMode) {
    let e = env();
    let mut p = proxier(mode, IptablesVariant::Nft, &e.hosts);
    p.sync(model(true), true).expect("sync");
    let hits = tcp_hits(&e.hosts.pods[0], addr(WEB, 80), 30);
    assert!(
        hits.get("pod1").copied().unwrap_or(0) > 0,
        "pod1 never reached itself: {hits:?}"
    );
    assert_eq!(hits.values().sum::<usize>(), 30);
    assert!(
        hits.keys().all(|k| !k.starts_with("error")),
        "hairpin failures: {hits:?}"
    );

    for (ns, target) in [
        (&e.hosts.client, addr(EMPTY, 80)),
        (&e.hosts.node2, addr(NODE_IP, 30100)),
    ] {
        let (took, res) = ns.run_in(move || {
            let start = Instant::now();
            let r = tcp_once(target);
            (start.elapsed(), r)
        });
        let err = res.expect_err("a service without endpoints must refuse");
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{target}: {err}"
        );
        assert!(
            took < Duration::from_millis(500),
            "{target}: refusal took {took:?}"
        );
    }
}

/// ClientIP affinity keeps one client on one backend; a backend that turns unready stops
/// getting new connections; a removed UDP endpoint's conntrack entries are cleared.
fn affinity_unready_and_udp_conntrack(mode: ProxyMode) {
    let e = env();
    let mut p = proxier(mode, IptablesVariant::Nft, &e.hosts);
    p.sync(model(true), true).expect("sync");
    let sticky = tcp_hits(&e.hosts.client, addr(STICKY, 80), 30);
    assert_eq!(sticky.len(), 1, "affinity broken: {sticky:?}");
    assert!(sticky.keys().all(|k| k.starts_with("pod")), "{sticky:?}");

    let flow = udp_flow_to_pod2(&e.hosts);

    let mut m = model(false);
    // pod2 also leaves the UDP service.
    if let Some(dns) = m.services.values_mut().find(|s| s.name.name == "dns") {
        dns.endpoints.retain(|e| e.ip.to_string() == POD_IPS[0]);
    }
    p.sync(m, false).expect("partial sync");
    let after = udp_on(&flow, addr(DNS, 53)).unwrap_or_else(|e| format!("error: {e}"));
    assert_eq!(
        after, "pod1",
        "the stale UDP conntrack entry still led to pod2"
    );

    let hits = tcp_hits(&e.hosts.client, addr(WEB, 80), 50);
    assert_eq!(
        hits.get("pod1"),
        Some(&50),
        "unready pod2 still got connections: {hits:?}"
    );
}

/// One UDP socket, so one conntrack entry, that reached pod2 before an endpoint change
/// (opened in the client host, it stays there whichever thread uses it). Retried until pod2
/// answered, so that a change of pod2 must change the path if the entry goes.
fn udp_flow_to_pod2(hosts: &Hosts) -> std::net::UdpSocket {
    let flow = hosts.client.run_in(|| {
        (0..51).find_map(|_| {
            let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind");
            (udp_on(&s, addr(DNS, 53)).ok()? == "pod2").then_some(s)
        })
    });
    flow.expect("could not get a UDP flow to pod2")
}

/// pod2 is deleted with a grace period (its endpoints turn terminating, still serving): from
/// the next sync on, new TCP connections and new UDP flows go to pod1 only, while pod2's
/// existing UDP flow goes on to pod2 (its conntrack entry is left alone, as kube-proxy does).
fn terminating_drains(mode: ProxyMode) {
    let e = env();
    let mut p = proxier(mode, IptablesVariant::Nft, &e.hosts);
    p.sync(model(true), true).expect("sync");
    let flow = udp_flow_to_pod2(&e.hosts);

    let mut m = model(true);
    for ep in m.services.values_mut().flat_map(|s| s.endpoints.iter_mut()) {
        if ep.ip.to_string() == POD_IPS[1] {
            (ep.ready, ep.serving, ep.terminating) = (false, true, true);
        }
    }
    p.sync(m, false).expect("partial sync");
    let after = udp_on(&flow, addr(DNS, 53)).unwrap_or_else(|e| format!("error: {e}"));
    assert_eq!(after, "pod2", "the draining pod's UDP flow was cut");
    let tcp = tcp_hits(&e.hosts.client, addr(WEB, 80), 40);
    assert_eq!(tcp.get("pod1"), Some(&40), "new connections: {tcp:?}");
    let udp = answers(&e.hosts.client, addr(DNS, 53), 20, udp_once);
    assert_eq!(udp.get("pod1"), Some(&20), "new UDP flows: {udp:?}");
}

/// Runs the sync loop (canary every second) in the background until dropped.
struct Loop {
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Loop {
    fn start(p: Proxier, model: ProxyModel) -> Loop {
        let (stop, shutdown) = Shutdown::manual();
        let source = Arc::new(StaticSource::default());
        if let Ok(mut m) = source.model.lock() {
            *m = Some(model);
        }
        let cfg = LoopConfig {
            min_sync_period: Duration::from_millis(200),
            sync_period: Duration::from_secs(30),
            canary_period: Duration::from_secs(1),
        };
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(run_sync_loop(p, source, Changes::default(), cfg, shutdown));
        });
        Loop {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until a connection from `host` to `target` is answered.
fn wait_for_service(host: &TestHost, target: SocketAddr, what: &str, limit: Duration) {
    eventually(what, limit, || {
        host.run_in(move || tcp_once(target))
            .map_err(|e| e.to_string())
    });
}

/// An external flush inside the test host: the canary notices and rules are back within 5 s.
fn flush_restored(mode: ProxyMode) {
    let e = env();
    let p = proxier(mode, IptablesVariant::Nft, &e.hosts);
    let _loop = Loop::start(p, model(true));
    let web = addr(WEB, 80);
    wait_for_service(
        &e.hosts.client,
        web,
        "initial sync",
        Duration::from_secs(10),
    );
    // Flush and look at the result in one go, so the check cannot race the repair.
    let flushed_at = Instant::now();
    let left = e.hosts.node.sh_ok(match mode {
        ProxyMode::Iptables => "iptables-nft -t nat -F && iptables-nft -t nat -S KUBE-SERVICES",
        ProxyMode::Nftables => "nft flush ruleset && nft list ruleset",
    });
    assert!(
        !left.contains("-A ") && !left.contains("keelson"),
        "flush left rules: {left}"
    );
    let what = "rules restored after the flush";
    wait_for_service(&e.hosts.client, web, what, Duration::from_secs(8));
    let took = flushed_at.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "rules restored only after {took:?}"
    );
}

/// A restarted proxy (fresh state) writes the same rules, with no window without rules.
fn restart_same_rules(mode: ProxyMode) {
    let e = env();
    let mut first = proxier(mode, IptablesVariant::Nft, &e.hosts);
    first.sync(model(true), true).expect("sync");
    let before = dump(&e.hosts.node, mode);
    drop(first);

    let (_second, ok, failed) = hammer(&e.hosts.client, addr(WEB, 80), || {
        std::thread::sleep(Duration::from_millis(200));
        let mut second = proxier(mode, IptablesVariant::Nft, &e.hosts);
        second.sync(model(true), true).expect("sync after restart");
        std::thread::sleep(Duration::from_millis(200));
        second
    });
    assert_eq!(
        before,
        dump(&e.hosts.node, mode),
        "a restart changed the rules"
    );
    assert!(ok + failed > 10, "too few connections to judge");
    assert_eq!(failed, 0, "connections failed during the restart");
}

macro_rules! both_backends {
    ($($name:ident => $body:expr;)*) => {
        mod iptables {
            use super::*;
            $( #[test] fn $name() { let mode = ProxyMode::Iptables; $body(mode) } )*
        }
        mod nftables {
            use super::*;
            $( #[test] fn $name() { let mode = ProxyMode::Nftables; $body(mode) } )*
        }
    };
}

both_backends! {
    cluster_ip_spreads_over_both_backends => |m| cluster_ip_spread(m, IptablesVariant::Nft);
    node_port_from_another_host => node_port_from_other_host;
    hairpin_and_immediate_reject => hairpin_and_reject;
    affinity_keeps_client_unready_stops_udp_conntrack_cleared => affinity_unready_and_udp_conntrack;
    terminating_endpoint_gets_nothing_new_and_keeps_its_udp_flow => terminating_drains;
    external_flush_is_repaired_within_5s => flush_restored;
    restart_writes_the_same_rules => restart_same_rules;
}

#[test]
fn iptables_legacy_cluster_ip_spread() {
    cluster_ip_spread(ProxyMode::Iptables, IptablesVariant::Legacy);
}
