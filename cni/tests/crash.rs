//! kill -9 of the plugin in the middle of ADD, many times; then the runtime's DEL and GC.
//! Nothing may leak and no address may be handed out twice.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const KILLS: usize = 60;

fn eth0_addr(ns: &TestHost) -> Option<String> {
    if !ns.links().contains(&"eth0".to_string()) {
        return None;
    }
    ns.ip(&["-o", "-4", "addr", "show", "dev", "eth0"])
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .map(|a| a.split('/').next().unwrap_or(a).to_string())
}

#[test]
fn kill_9_during_add_then_del_and_gc_leaks_nothing() {
    require_root_and_tools(&["ip", "nsenter"]);
    let host = TestHost::create("host");
    let data = tempfile::tempdir().expect("tempdir");
    let net_dir = data.path().join("kccrash");
    let conf: Value = bridge_conf(
        "keelson-cni",
        "keelson-ipam",
        "kccrash",
        "kcbr7",
        "10.85.0.0/24",
        data.path(),
        json!({}),
    );
    let text = conf.to_string();
    let bin = keelson_bin();

    // Warm up once so timings below land inside ADD rather than in the first bridge creation.
    let warm = TestHost::create("warm");
    Call::new(&bin, &host, "ADD", "warm")
        .netns(&warm)
        .run(&text)
        .expect_ok();
    let warm2 = TestHost::create("warm2");
    let full = Call::new(&bin, &host, "ADD", "warm2")
        .netns(&warm2)
        .run(&text)
        .expect_ok()
        .elapsed;

    let victims: Vec<TestHost> = (0..KILLS)
        .map(|i| TestHost::create(&format!("k{i}")))
        .collect();
    // How late a kill may come and still land inside ADD. It starts at the warm ADD's time and
    // shrinks whenever an ADD finished first, so a fast machine (or one slow warm-up) still gets
    // kills spread over the whole ADD rather than after it.
    let mut span = full.min(Duration::from_millis(20));
    let mut killed = 0;
    let mut killed_ids = HashSet::new();
    for (i, ns) in victims.iter().enumerate() {
        let id = format!("crash-{i}");
        let call = Call::new(&bin, &host, "ADD", &id).netns(ns);
        // Spread the kills over the ADD, from start-up to the last netlink request.
        let delay = span.mul_f64((i % 10) as f64 / 10.0);
        if call.run_killed_after(&text, delay) {
            killed += 1;
            killed_ids.insert(id);
            span = span.mul_f64(1.05).min(full);
        } else {
            span = span.mul_f64(0.7);
        }
    }
    assert!(
        killed >= KILLS / 6,
        "only {killed} of {KILLS} runs died by SIGKILL; the rest finished first"
    );

    // Fresh ADDs while the crashed ones' state is still there: no address may collide.
    let fresh: Vec<TestHost> = (0..5).map(|i| TestHost::create(&format!("f{i}"))).collect();
    for (i, ns) in fresh.iter().enumerate() {
        Call::new(&bin, &host, "ADD", &format!("fresh-{i}"))
            .netns(ns)
            .run(&text)
            .expect_ok();
    }
    let mut seen = HashSet::new();
    for ns in victims.iter().chain(&fresh) {
        if let Some(a) = eth0_addr(ns) {
            assert!(
                seen.insert(a.clone()),
                "address {a} configured in two namespaces"
            );
        }
    }
    // Every allocation file holds a complete owner record.
    for ip in allocations(&net_dir) {
        let body = std::fs::read_to_string(net_dir.join(&ip)).expect("read allocation");
        assert!(
            body.contains("\r\neth0"),
            "half-written allocation {ip}: {body:?}"
        );
    }

    // The kills must have landed inside ADD: killed runs left allocations (and interfaces).
    let held_by_killed = allocations(&net_dir)
        .iter()
        .filter_map(|ip| std::fs::read_to_string(net_dir.join(ip)).ok())
        .filter(|body| {
            body.lines()
                .next()
                .is_some_and(|id| killed_ids.contains(id.trim()))
        })
        .count();
    let ifaces_of_killed = victims
        .iter()
        .enumerate()
        .filter(|(i, ns)| killed_ids.contains(&format!("crash-{i}")) && ns.links().len() > 1)
        .count();
    eprintln!(
        "{killed} killed; they left {held_by_killed} allocations and {ifaces_of_killed} interfaces"
    );
    assert!(
        held_by_killed > 0,
        "no kill landed after the address was reserved"
    );

    // The runtime calls DEL for every failed ADD; half without a namespace path.
    for (i, ns) in victims.iter().enumerate() {
        let id = format!("crash-{i}");
        let call = Call::new(&bin, &host, "DEL", &id);
        let call = if i % 2 == 0 { call.netns(ns) } else { call };
        call.run(&text).expect_ok();
    }
    // GC keeps exactly the live attachments (warm-ups and fresh ones).
    let mut valid: Vec<Value> = (0..5)
        .map(|i| json!({"containerID": format!("fresh-{i}"), "ifname": "eth0"}))
        .collect();
    valid.push(json!({"containerID": "warm", "ifname": "eth0"}));
    valid.push(json!({"containerID": "warm2", "ifname": "eth0"}));
    Call::new(&bin, &host, "GC", "")
        .run(&with(&conf, "cni.dev/valid-attachments", json!(valid)).to_string())
        .expect_ok();

    assert_eq!(
        allocations(&net_dir).len(),
        7,
        "allocations: {:?}",
        allocations(&net_dir)
    );
    wait_veths(&host, 7);
    for ns in &victims {
        assert_eq!(
            ns.links(),
            ["lo"],
            "crashed attachment left an interface in {}",
            ns.name
        );
    }

    // Finally everything goes.
    Call::new(&bin, &host, "GC", "")
        .run(&with(&conf, "cni.dev/valid-attachments", json!([])).to_string())
        .expect_ok();
    assert!(allocations(&net_dir).is_empty());
    wait_veths(&host, 0);
    let leftovers: Vec<String> = std::fs::read_dir(&net_dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp") || n.starts_with(".owner-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary or index files left: {leftovers:?}"
    );
}

/// ADD killed at a random point, then the runtime's DEL, over and over on a small pool of
/// namespaces (KEELSON_CNI_KILL_CYCLES, default 200; the performance target asks for 10,000).
#[test]
fn kill_9_add_del_cycles_leak_nothing() {
    require_root_and_tools(&["ip", "nsenter"]);
    let cycles: usize = std::env::var("KEELSON_CNI_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let host = TestHost::create("host");
    let data = tempfile::tempdir().expect("tempdir");
    let net_dir = data.path().join("kccycle");
    let conf = bridge_conf(
        "keelson-cni",
        "keelson-ipam",
        "kccycle",
        "kcbr8",
        "10.86.0.0/24",
        data.path(),
        json!({}),
    );
    let text = conf.to_string();
    let bin = keelson_bin();
    // One long-lived attachment whose address must never be handed out again.
    let keeper = TestHost::create("keep");
    let kept = Call::new(&bin, &host, "ADD", "keeper")
        .netns(&keeper)
        .run(&text)
        .expect_ok()
        .json();
    let kept_ip = kept["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let pool: Vec<TestHost> = (0..8)
        .map(|i| TestHost::create(&format!("cy{i}")))
        .collect();
    let mut killed = 0usize;
    for i in 0..cycles {
        let ns = &pool[i % pool.len()];
        let id = format!("cycle-{i}");
        let delay = Duration::from_micros(rand::random::<u64>() % 6000);
        if Call::new(&bin, &host, "ADD", &id)
            .netns(ns)
            .run_killed_after(&text, delay)
        {
            killed += 1;
        }
        if let Some(a) = eth0_addr(ns) {
            assert_ne!(
                a, kept_ip,
                "cycle {i}: the live attachment's address was handed out again"
            );
        }
        Call::new(&bin, &host, "DEL", &id)
            .netns(ns)
            .run(&text)
            .expect_ok();
        if i % 50 == 49 || i + 1 == cycles {
            let allocs = allocations(&net_dir);
            assert_eq!(
                allocs,
                std::slice::from_ref(&kept_ip),
                "cycle {i}: leaked allocations"
            );
        }
    }
    assert!(
        killed > cycles / 4,
        "only {killed} of {cycles} ADDs were killed mid-way"
    );
    wait_veths(&host, 1);
    for ns in &pool {
        assert_eq!(ns.links(), ["lo"], "left in {}", ns.name);
    }
    eprintln!("{cycles} cycles, {killed} killed mid-ADD, nothing leaked");
}
