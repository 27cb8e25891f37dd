//! Address management through the real binary: parallel ADDs, exhaustion, GC, STATUS, and the
//! same binary serving as IPAM plugin for the reference bridge.

mod common;

use std::collections::HashSet;

use common::*;
use serde_json::{json, Value};

fn setup() -> (TestHost, tempfile::TempDir) {
    require_root_and_tools(&["ip", "nsenter"]);
    (
        TestHost::create("host"),
        tempfile::tempdir().expect("tempdir"),
    )
}

fn conf(data: &std::path::Path, subnet: &str) -> Value {
    bridge_conf(
        "keelson-cni",
        "keelson-ipam",
        "kcipam",
        "kcbr1",
        subnet,
        data,
        json!({}),
    )
}

#[test]
fn fifty_parallel_adds_get_fifty_distinct_addresses() {
    let (host, data) = setup();
    let c = conf(data.path(), "10.80.0.0/24").to_string();
    let nss: Vec<TestHost> = (0..50)
        .map(|i| TestHost::create(&format!("p{i}")))
        .collect();
    let bin = keelson_bin();
    let results: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = nss
            .iter()
            .enumerate()
            .map(|(i, ns)| {
                let (bin, host, c) = (&bin, &host, &c);
                s.spawn(move || {
                    let id = format!("par-{i}");
                    Call::new(bin, host, "ADD", &id).netns(ns).run(c)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect()
    });
    let mut addrs = HashSet::new();
    for r in &results {
        let v = r.json();
        assert!(r.ok, "ADD failed: {}", r.stdout);
        assert!(
            addrs.insert(v["ips"][0]["address"].as_str().unwrap().to_string()),
            "duplicate address"
        );
    }
    assert_eq!(addrs.len(), 50);
    assert_eq!(allocations(&data.path().join("kcipam")).len(), 50);
    // And each namespace really holds its own address.
    for (ns, r) in nss.iter().zip(&results) {
        let want = r.json()["ips"][0]["address"].as_str().unwrap().to_string();
        assert!(ns
            .ip(&["-o", "addr", "show", "dev", "eth0"])
            .contains(&want));
    }
}

#[test]
fn exhausting_a_29_fails_with_code_and_leaves_nothing() {
    let (host, data) = setup();
    let c = conf(data.path(), "10.80.1.0/29").to_string();
    let nss: Vec<TestHost> = (0..6).map(|i| TestHost::create(&format!("x{i}"))).collect();
    // A /29 has 6 host addresses; one is the gateway: five attachments fit.
    for (i, ns) in nss.iter().take(5).enumerate() {
        Call::new(&keelson_bin(), &host, "ADD", &format!("ex-{i}"))
            .netns(ns)
            .run(&c)
            .expect_ok();
    }
    let veths_before = host
        .links()
        .iter()
        .filter(|l| l.starts_with("veth"))
        .count();
    let r = Call::new(&keelson_bin(), &host, "ADD", "ex-5")
        .netns(&nss[5])
        .run(&c);
    assert_eq!(r.code(), 101);
    let msg = r.json()["msg"].as_str().unwrap().to_string();
    assert!(
        msg.contains("no free address") && msg.contains("10.80.1.0/29"),
        "{msg}"
    );
    assert_eq!(nss[5].links(), ["lo"], "failed ADD left an interface");
    assert_eq!(
        host.links()
            .iter()
            .filter(|l| l.starts_with("veth"))
            .count(),
        veths_before
    );
    assert_eq!(allocations(&data.path().join("kcipam")).len(), 5);
    // STATUS reports the range as unable to serve ADD.
    let st = Call::new(&keelson_bin(), &host, "STATUS", "").run(&c);
    assert_eq!(st.code(), 50);
}

#[test]
fn gc_releases_exactly_the_attachments_not_listed() {
    let (host, data) = setup();
    let c = conf(data.path(), "10.80.2.0/24");
    let nss: Vec<TestHost> = (0..5).map(|i| TestHost::create(&format!("g{i}"))).collect();
    let mut addr_of = Vec::new();
    for (i, ns) in nss.iter().enumerate() {
        let r = Call::new(&keelson_bin(), &host, "ADD", &format!("gc-{i}"))
            .netns(ns)
            .run(&c.to_string())
            .expect_ok();
        addr_of.push(
            r.json()["ips"][0]["address"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .to_string(),
        );
    }
    let keep = [0usize, 2, 3];
    let valid: Vec<Value> = keep
        .iter()
        .map(|i| json!({"containerID": format!("gc-{i}"), "ifname": "eth0"}))
        .collect();
    let gc = with(&c, "cni.dev/valid-attachments", json!(valid));
    Call::new(&keelson_bin(), &host, "GC", "")
        .run(&gc.to_string())
        .expect_ok();

    let mut want: Vec<String> = keep.iter().map(|i| addr_of[*i].clone()).collect();
    want.sort();
    assert_eq!(allocations(&data.path().join("kcipam")), want);
    for (i, ns) in nss.iter().enumerate() {
        let has = ns.links().contains(&"eth0".to_string());
        // Veths of collected attachments go away (in the background), kept ones stay.
        if keep.contains(&i) {
            assert!(has, "kept attachment {i} lost its interface");
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline
        && host
            .links()
            .iter()
            .filter(|l| l.starts_with("veth"))
            .count()
            != 3
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        host.links()
            .iter()
            .filter(|l| l.starts_with("veth"))
            .count(),
        3
    );
    assert!(!nss[1].links().contains(&"eth0".to_string()));
    assert!(!nss[4].links().contains(&"eth0".to_string()));

    // GC with an empty list releases everything.
    let gc = with(&c, "cni.dev/valid-attachments", json!([]));
    Call::new(&keelson_bin(), &host, "GC", "")
        .run(&gc.to_string())
        .expect_ok();
    assert!(allocations(&data.path().join("kcipam")).is_empty());
}

#[test]
fn status_fails_when_data_dir_unusable() {
    let (host, data) = setup();
    // A file where the directory should be.
    let blocker = data.path().join("blocker");
    std::fs::write(&blocker, b"").expect("write");
    let c = conf(&blocker, "10.80.6.0/24");
    let st = Call::new(&keelson_bin(), &host, "STATUS", "").run(&c.to_string());
    assert_eq!(st.code(), 50);
    assert!(!st.json()["details"].as_str().unwrap_or_default().is_empty());
}

#[test]
fn status_ok_and_gc_needs_1_1() {
    let (host, data) = setup();
    let c = conf(data.path(), "10.80.3.0/24");
    let st = Call::new(&keelson_bin(), &host, "STATUS", "")
        .run(&c.to_string())
        .expect_ok();
    assert!(st.stdout.is_empty());
    let old = with(&c, "cniVersion", json!("1.0.0"));
    let r = Call::new(&keelson_bin(), &host, "GC", "").run(&old.to_string());
    assert_eq!(r.code(), 1);
}

#[test]
fn serves_as_ipam_plugin_for_the_reference_bridge() {
    let (host, data) = setup();
    assert!(
        std::path::Path::new("/usr/lib/cni/bridge").is_file(),
        "reference plugins missing: apt-get install containernetworking-plugins"
    );
    let aliases = alias_dir(&["keelson-ipam"]);
    let cni_path = format!("{}:/usr/lib/cni", aliases.path().display());
    let c = with(
        &bridge_conf(
            "bridge",
            "keelson-ipam",
            "kcdeleg",
            "kcbr2",
            "10.80.4.0/24",
            data.path(),
            json!({}),
        ),
        "cniVersion",
        json!("1.0.0"),
    );
    let ns = TestHost::create("c");
    let r = Call::new(
        std::path::Path::new("/usr/lib/cni/bridge"),
        &host,
        "ADD",
        "deleg",
    )
    .netns(&ns)
    .cni_path(&cni_path)
    .run(&c.to_string())
    .expect_ok();
    assert_eq!(r.json()["ips"][0]["address"], "10.80.4.2/24");
    assert_eq!(allocations(&data.path().join("kcdeleg")), ["10.80.4.2"]);
    let with_prev = with(&c, "prevResult", r.json());
    Call::new(
        std::path::Path::new("/usr/lib/cni/bridge"),
        &host,
        "DEL",
        "deleg",
    )
    .netns(&ns)
    .cni_path(&cni_path)
    .run(&with_prev.to_string())
    .expect_ok();
    assert!(allocations(&data.path().join("kcdeleg")).is_empty());
}

#[test]
fn delegates_to_reference_host_local_when_configured() {
    let (host, data) = setup();
    let c = with(
        &bridge_conf(
            "keelson-cni",
            "host-local",
            "kchl",
            "kcbr3",
            "10.80.5.0/24",
            data.path(),
            json!({}),
        ),
        "cniVersion",
        json!("1.0.0"),
    );
    let ns = TestHost::create("c");
    let r = Call::new(&keelson_bin(), &host, "ADD", "hl")
        .netns(&ns)
        .run(&c.to_string())
        .expect_ok();
    assert_eq!(r.json()["ips"][0]["address"], "10.80.5.2/24");
    assert!(ns
        .ip(&["-o", "addr", "show", "dev", "eth0"])
        .contains("10.80.5.2/24"));
    Call::new(&keelson_bin(), &host, "DEL", "hl")
        .netns(&ns)
        .run(&c.to_string())
        .expect_ok();
    assert!(allocations(&data.path().join("kchl")).is_empty());
}
