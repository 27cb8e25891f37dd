//! keelson-cni as containerd runs it, in test hosts: connectivity, result shape, CHECK, DEL.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

struct Fixture {
    host: TestHost,
    data: tempfile::TempDir,
}

fn fixture() -> Fixture {
    require_root_and_tools(&["ip", "nsenter"]);
    Fixture {
        host: TestHost::create("host"),
        data: tempfile::tempdir().expect("tempdir"),
    }
}

fn conf(f: &Fixture, subnet: &str, extra: Value) -> Value {
    bridge_conf(
        "keelson-cni",
        "keelson-ipam",
        "kcnet",
        "kcbr0",
        subnet,
        f.data.path(),
        extra,
    )
}

fn add(f: &Fixture, id: &str, ns: &TestHost, conf: &Value) -> Value {
    Call::new(&keelson_bin(), &f.host, "ADD", id)
        .netns(ns)
        .run(&conf.to_string())
        .expect_ok()
        .json()
}

/// Listens on `addr` inside `ns` (a socket stays in the namespace it was made in), echoes one
/// message back from a background thread.
fn echo_server(ns: &TestHost, addr: String) -> std::thread::JoinHandle<()> {
    let listener =
        ns.run_in(move || TcpListener::bind(&addr).unwrap_or_else(|e| panic!("bind {addr}: {e}")));
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut buf = [0u8; 5];
        conn.read_exact(&mut buf).expect("read");
        conn.write_all(&buf).expect("echo");
    })
}

fn tcp_roundtrip(from: &TestHost, to: String) -> Result<(), String> {
    from.run_in(move || {
        let addr = to.parse().map_err(|e| format!("{e}"))?;
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .map_err(|e| format!("connect {to}: {e}"))?;
        s.write_all(b"hello").map_err(|e| e.to_string())?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).map_err(|e| e.to_string())?;
        if &buf == b"hello" {
            Ok(())
        } else {
            Err("echo mismatch".into())
        }
    })
}

#[test]
fn two_attachments_talk_tcp_to_each_other_and_to_the_gateway() {
    let f = fixture();
    let (a, b) = (TestHost::create("a"), TestHost::create("b"));
    let c = conf(
        &f,
        "10.77.0.0/24",
        json!({"hairpinMode": true, "mtu": 1400}),
    );
    let ra = add(&f, "ctr-a", &a, &c);
    let rb = add(&f, "ctr-b", &b, &c);
    let ip_of = |r: &Value| {
        r["ips"][0]["address"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    let (ipa, ipb) = (ip_of(&ra), ip_of(&rb));
    assert_ne!(ipa, ipb);

    let server = echo_server(&a, format!("{ipa}:7001"));
    tcp_roundtrip(&b, format!("{ipa}:7001")).expect("b -> a over TCP");
    server.join().expect("server");

    let gw = ra["ips"][0]["gateway"].as_str().unwrap().to_string();
    assert_eq!(gw, "10.77.0.1");
    let server = echo_server(&f.host, format!("{gw}:7002"));
    tcp_roundtrip(&a, format!("{gw}:7002")).expect("a -> gateway over TCP");
    server.join().expect("server");

    // Nothing answers outside the test host: no default route in the host namespace.
    assert!(tcp_roundtrip(&a, "10.78.0.9:80".into()).is_err());
}

#[test]
fn result_lists_interfaces_ips_with_index_and_routes() {
    let f = fixture();
    let ns = TestHost::create("c");
    let r = add(
        &f,
        "ctr-shape",
        &ns,
        &conf(&f, "10.77.1.0/24", json!({"isDefaultGateway": true})),
    );
    assert_eq!(r["cniVersion"], "1.1.0");
    let ifaces = r["interfaces"].as_array().expect("interfaces");
    assert_eq!(ifaces.len(), 3);
    assert_eq!(ifaces[0]["name"], "kcbr0");
    assert!(ifaces[1]["name"].as_str().unwrap().starts_with("veth"));
    assert_eq!(ifaces[2]["name"], "eth0");
    assert_eq!(ifaces[2]["sandbox"], ns.path().to_str().unwrap());
    for i in ifaces {
        assert_eq!(i["mac"].as_str().unwrap().len(), 17, "mac of {i}");
    }
    let ip = &r["ips"][0];
    assert_eq!(ip["interface"], 2);
    assert_eq!(ip["address"], "10.77.1.2/24");
    assert_eq!(ip["gateway"], "10.77.1.1");
    assert_eq!(
        r["routes"],
        json!([{"dst": "0.0.0.0/0", "gw": "10.77.1.1"}])
    );
    // The container's MAC in the result is the one in the namespace.
    let link = ns.ip(&["-o", "link", "show", "eth0"]);
    assert!(link.contains(ifaces[2]["mac"].as_str().unwrap()), "{link}");
}

#[test]
fn check_passes_then_fails_clearly_after_address_removed() {
    let f = fixture();
    let ns = TestHost::create("c");
    let c = conf(&f, "10.77.2.0/24", json!({}));
    let r = add(&f, "ctr-check", &ns, &c);
    let with_prev = with(&c, "prevResult", r.clone());
    Call::new(&keelson_bin(), &f.host, "CHECK", "ctr-check")
        .netns(&ns)
        .run(&with_prev.to_string())
        .expect_ok();

    ns.ip(&[
        "addr",
        "del",
        r["ips"][0]["address"].as_str().unwrap(),
        "dev",
        "eth0",
    ]);
    let bad = Call::new(&keelson_bin(), &f.host, "CHECK", "ctr-check")
        .netns(&ns)
        .run(&with_prev.to_string());
    assert_eq!(bad.code(), 102);
    let msg = bad.json()["msg"].as_str().unwrap().to_string();
    assert!(
        msg.contains("10.77.2.2/24") && msg.contains("eth0") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn del_twice_succeeds_and_leaves_nothing() {
    let f = fixture();
    let ns = TestHost::create("c");
    let c = conf(&f, "10.77.3.0/24", json!({}));
    let r = add(&f, "ctr-del", &ns, &c);
    let with_prev = with(&c, "prevResult", r);
    for _ in 0..2 {
        Call::new(&keelson_bin(), &f.host, "DEL", "ctr-del")
            .netns(&ns)
            .run(&with_prev.to_string())
            .expect_ok();
    }
    // Without netns and without prevResult, as a runtime may call it after a crash.
    Call::new(&keelson_bin(), &f.host, "DEL", "ctr-del")
        .run(&c.to_string())
        .expect_ok();
    assert!(allocations(&f.data.path().join("kcnet")).is_empty());
    wait_veths(&f.host, 0);
    assert_eq!(ns.links(), ["lo"]);
}

#[test]
fn sync_delete_removes_pair_before_returning() {
    let f = fixture();
    let ns = TestHost::create("c");
    let c = conf(&f, "10.77.4.0/24", json!({"syncDelete": true}));
    add(&f, "ctr-sync", &ns, &c);
    Call::new(&keelson_bin(), &f.host, "DEL", "ctr-sync")
        .netns(&ns)
        .run(&c.to_string())
        .expect_ok();
    assert!(veths(&f.host).is_empty());
    assert_eq!(ns.links(), ["lo"]);
}

#[test]
fn ip_masq_chain_added_and_removed() {
    let f = fixture();
    require_root_and_tools(&["iptables-save", "iptables-restore"]);
    let ns = TestHost::create("c");
    let c = conf(&f, "10.77.5.0/24", json!({"ipMasq": true}));
    let r = add(&f, "ctr-masq", &ns, &c);
    let save = f.host.sh("iptables-save -t nat");
    let text = String::from_utf8_lossy(&save.stdout).into_owned();
    assert!(
        text.contains("-s 10.77.5.2/32")
            && text.contains("MASQUERADE")
            && text.contains("keelson-cni:kcnet"),
        "{text}"
    );
    let with_prev = with(&c, "prevResult", r);
    Call::new(&keelson_bin(), &f.host, "CHECK", "ctr-masq")
        .netns(&ns)
        .run(&with_prev.to_string())
        .expect_ok();
    // The second DEL finds the rules gone (its fast path fails) and still succeeds.
    for _ in 0..2 {
        Call::new(&keelson_bin(), &f.host, "DEL", "ctr-masq")
            .netns(&ns)
            .run(&with_prev.to_string())
            .expect_ok();
    }
    let text = String::from_utf8_lossy(&f.host.sh("iptables-save -t nat").stdout).into_owned();
    assert!(
        !text.contains("KCNI-") && !text.contains("keelson-cni"),
        "{text}"
    );
}

#[test]
fn ipv6_dual_stack_without_dad_wait() {
    let f = fixture();
    let ns = TestHost::create("c");
    let mut c = conf(&f, "10.77.6.0/24", json!({"isDefaultGateway": true}));
    c["ipam"] = json!({
        "type": "keelson-ipam",
        "dataDir": f.data.path().to_str().unwrap(),
        "ranges": [[{"subnet": "10.77.6.0/24"}], [{"subnet": "fd00:77:6::/64"}]]
    });
    let r = add(&f, "ctr-v6", &ns, &c);
    assert_eq!(r["ips"][1]["address"], "fd00:77:6::2/64");
    let addrs = ns.ip(&["-6", "addr", "show", "dev", "eth0"]);
    let line = addrs
        .lines()
        .find(|l| l.contains("fd00:77:6::2"))
        .expect("v6 address present");
    assert!(!line.contains("tentative"), "DAD not skipped: {line}");
    let routes = ns.ip(&["-6", "route"]);
    assert!(routes.contains("default via fd00:77:6::1"), "{routes}");
    // Reachable right away over the bridge.
    let server = echo_server(&f.host, "[fd00:77:6::1]:7003".into());
    tcp_roundtrip(&ns, "[fd00:77:6::1]:7003".into()).expect("v6 tcp to gateway");
    server.join().expect("server");
}

#[test]
fn gc_removes_masquerade_chains_of_collected_attachments_only() {
    let f = fixture();
    require_root_and_tools(&["iptables-save", "iptables-restore"]);
    let (a, b) = (TestHost::create("a"), TestHost::create("b"));
    let c = conf(&f, "10.77.7.0/24", json!({"ipMasq": true}));
    add(&f, "masq-a", &a, &c);
    add(&f, "masq-b", &b, &c);
    let gc = with(
        &c,
        "cni.dev/valid-attachments",
        json!([{"containerID": "masq-a", "ifname": "eth0"}]),
    );
    Call::new(&keelson_bin(), &f.host, "GC", "")
        .run(&gc.to_string())
        .expect_ok();
    let text = String::from_utf8_lossy(&f.host.sh("iptables-save -t nat").stdout).into_owned();
    assert!(
        text.contains("-s 10.77.7.2/32"),
        "kept attachment lost its rule: {text}"
    );
    assert!(
        !text.contains("-s 10.77.7.3/32"),
        "collected attachment kept its rule: {text}"
    );
    assert_eq!(text.matches(":KCNI-").count(), 1, "{text}");
}

/// Accepts `n` connections on `addr` inside `ns` and returns the peers' addresses as seen there.
fn peer_addresses(ns: &TestHost, addr: &str, n: usize) -> std::thread::JoinHandle<Vec<String>> {
    let addr = addr.to_string();
    let listener =
        ns.run_in(move || TcpListener::bind(&addr).unwrap_or_else(|e| panic!("bind {addr}: {e}")));
    std::thread::spawn(move || {
        (0..n)
            .map(|_| {
                let (_, peer) = listener.accept().expect("accept");
                peer.ip().to_string()
            })
            .collect()
    })
}

fn connect_from(ns: &TestHost, to: &str) {
    let to = to.to_string();
    ns.run_in(move || {
        TcpStream::connect_timeout(&to.parse().expect("address"), Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("connect {to}: {e}"));
    });
}

#[test]
fn ip_masq_leaves_the_cluster_cidr_alone() {
    let f = fixture();
    require_root_and_tools(&["iptables-save", "iptables-restore"]);
    // Another "node" behind the host's uplink: an address in the cluster's pod network (another
    // node's pod) and one outside it.
    let other = TestHost::create("o");
    f.host
        .veth("kup", "172.30.8.1/24", &other, "kdown", "172.30.8.2/24");
    other.ip(&["addr", "add", "10.77.9.1/32", "dev", "lo"]);
    other.ip(&["addr", "add", "198.51.100.1/32", "dev", "lo"]);
    other.ip(&["route", "add", "10.77.8.0/24", "via", "172.30.8.1"]);
    for dst in ["10.77.9.1/32", "198.51.100.1/32"] {
        f.host.ip(&["route", "add", dst, "via", "172.30.8.2"]);
    }
    let pod = TestHost::create("p");
    let c = conf(
        &f,
        "10.77.8.0/24",
        json!({"ipMasq": true, "nonMasqueradeCIDRs": ["10.77.0.0/16"]}),
    );
    add(&f, "ctr-cluster", &pod, &c);

    let seen = peer_addresses(&other, "0.0.0.0:7010", 2);
    connect_from(&pod, "10.77.9.1:7010");
    connect_from(&pod, "198.51.100.1:7010");
    assert_eq!(
        seen.join().expect("listener"),
        ["10.77.8.2", "172.30.8.1"],
        "a pod in the cluster CIDR sees the client pod; outside, the node's address"
    );
}

/// How a TCP connect from `from` to `to` ends: Ok, or the kind of error.
fn connect_result(from: &TestHost, to: String) -> Result<(), std::io::ErrorKind> {
    from.run_in(move || {
        let addr = to.parse().expect("socket address");
        TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .map(|_| ())
            .map_err(|e| e.kind())
    })
}

#[test]
fn a_deleted_pods_address_is_unreachable_at_once_until_handed_out_again() {
    let f = fixture();
    let (a, b) = (TestHost::create("a"), TestHost::create("b"));
    // One address in the range, so the next pod is given the same one.
    let c = conf(
        &f,
        "10.77.9.0/24",
        json!({"ipam": {"type": "keelson-ipam", "subnet": "10.77.9.0/24",
            "rangeStart": "10.77.9.7", "rangeEnd": "10.77.9.7", "dataDir": f.data.path()}}),
    );
    add(&f, "ctr-a", &a, &c);
    let server = echo_server(&a, "10.77.9.7:7005".into());
    tcp_roundtrip(&f.host, "10.77.9.7:7005".into()).expect("host -> pod");
    server.join().expect("server");

    Call::new(&keelson_bin(), &f.host, "DEL", "ctr-a")
        .netns(&a)
        .run(&c.to_string())
        .expect_ok();
    // Without the mark a connect would wait for ARP, then fail after seconds (or time out).
    assert_eq!(
        connect_result(&f.host, "10.77.9.7:7005".into()),
        Err(std::io::ErrorKind::HostUnreachable)
    );
    let routes = f.host.ip(&["route", "show", "proto", "251"]);
    assert_eq!(routes.trim(), "unreachable 10.77.9.7");

    add(&f, "ctr-b", &b, &c);
    assert_eq!(f.host.ip(&["route", "show", "proto", "251"]), "");
    let server = echo_server(&b, "10.77.9.7:7006".into());
    tcp_roundtrip(&f.host, "10.77.9.7:7006".into()).expect("host -> the new pod");
    server.join().expect("server");
}
