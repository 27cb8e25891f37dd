//! Side by side with Debian's reference plugins (bridge + host-local) on the same
//! configuration with the types swapped: same result shape, same state in the namespace.

mod common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

const REF_BRIDGE: &str = "/usr/lib/cni/bridge";

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// Visible state of an attachment: container address/route/link, host bridge and port.
fn state(host: &TestHost, ctr: &TestHost) -> Vec<String> {
    let link = ctr.ip(&["-o", "link", "show", "eth0"]);
    let flags = link
        .split('<')
        .nth(1)
        .and_then(|s| s.split('>').next())
        .unwrap_or("")
        .to_string();
    let mtu = link
        .split(" mtu ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    let addrs: Vec<String> = ctr
        .ip(&["-o", "-4", "addr", "show", "dev", "eth0"])
        .lines()
        .map(|l| {
            l.split_whitespace()
                .skip(2)
                .take(5)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let routes = ctr.ip(&["route", "show"]);
    let bridge = host.ip(&["-o", "-4", "addr", "show", "dev", "kcbr5"]);
    let bridge_addr = bridge.split_whitespace().nth(3).unwrap_or("").to_string();
    let port = host.ip(&["-d", "-o", "link", "show", "master", "kcbr5"]);
    let hairpin = port.contains("hairpin on");
    let port_mtu = port
        .split(" mtu ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    assert!(
        flags.contains("UP")
            && !mtu.is_empty()
            && !addrs.is_empty()
            && routes.contains("default")
            && !bridge_addr.is_empty()
            && !port_mtu.is_empty(),
        "incomplete state: {flags} {mtu} {addrs:?} {routes} {bridge_addr} {port_mtu}"
    );
    eprintln!("state: {flags} mtu {mtu} {addrs:?} {routes:?} bridge {bridge_addr} hairpin {hairpin} port mtu {port_mtu}");
    vec![
        format!("flags {flags}"),
        format!("mtu {mtu}"),
        format!("addrs {addrs:?}"),
        format!("routes {routes}"),
        format!("bridge {bridge_addr}"),
        format!("hairpin {hairpin}"),
        format!("port mtu {port_mtu}"),
    ]
}

fn side_by_side(extra: Value) {
    require_root_and_tools(&["ip", "nsenter"]);
    assert!(
        Path::new(REF_BRIDGE).is_file(),
        "reference plugins missing: apt-get install containernetworking-plugins"
    );
    let data = tempfile::tempdir().expect("tempdir");
    let (href, cref) = (TestHost::create("rh"), TestHost::create("rc"));
    let (hk, ck) = (TestHost::create("kh"), TestHost::create("kc"));
    let base = |plugin: &str, ipam: &str, dir: &str| {
        let mut c = bridge_conf(
            plugin,
            ipam,
            "kcside",
            "kcbr5",
            "10.95.0.0/24",
            &data.path().join(dir),
            extra.clone(),
        );
        // The reference fails ("file exists") when IPAM also lists a default route.
        if extra["isDefaultGateway"] == json!(true) {
            c["ipam"].as_object_mut().map(|o| o.remove("routes"));
        }
        with(&c, "cniVersion", json!("1.0.0"))
    };
    let conf_ref = base("bridge", "host-local", "ref");
    let conf_k = base("keelson-cni", "keelson-ipam", "k");

    let rr = Call::new(Path::new(REF_BRIDGE), &href, "ADD", "side-1")
        .netns(&cref)
        .run(&conf_ref.to_string())
        .expect_ok()
        .json();
    let rk = Call::new(&keelson_bin(), &hk, "ADD", "side-1")
        .netns(&ck)
        .run(&conf_k.to_string())
        .expect_ok()
        .json();

    // Result shape.
    assert_eq!(keys(&rr), keys(&rk), "top-level keys");
    assert_eq!(rr["cniVersion"], rk["cniVersion"]);
    let (ir, ik) = (
        rr["interfaces"].as_array().unwrap(),
        rk["interfaces"].as_array().unwrap(),
    );
    assert_eq!(ir.len(), ik.len());
    for (a, b) in ir.iter().zip(ik) {
        assert_eq!(keys(a), keys(b), "interface keys {a} vs {b}");
    }
    assert_eq!(ir[0]["name"], ik[0]["name"]);
    assert_eq!(ir[2]["name"], ik[2]["name"]);
    assert_eq!(rr["ips"], rk["ips"], "ips");
    assert_eq!(rr["routes"], rk["routes"], "routes");
    assert_eq!(rr["dns"], rk["dns"], "dns");

    // State.
    assert_eq!(state(&href, &cref), state(&hk, &ck));

    // Same allocation files on disk (host-local's format).
    let ref_dir = data.path().join("ref/kcside");
    let k_dir = data.path().join("k/kcside");
    assert_eq!(allocations(&ref_dir), allocations(&k_dir));
    for ip in allocations(&k_dir) {
        assert_eq!(
            std::fs::read(ref_dir.join(&ip)).unwrap(),
            std::fs::read(k_dir.join(&ip)).unwrap()
        );
    }

    // CHECK and DEL accept each other's prevResult shape.
    let ck_conf = with(&conf_k, "prevResult", rr.clone());
    Call::new(&keelson_bin(), &hk, "CHECK", "side-1")
        .netns(&ck)
        .run(&ck_conf.to_string())
        .expect_ok();
    Call::new(Path::new(REF_BRIDGE), &href, "DEL", "side-1")
        .netns(&cref)
        .run(&with(&conf_ref, "prevResult", rr).to_string())
        .expect_ok();
    Call::new(&keelson_bin(), &hk, "DEL", "side-1")
        .netns(&ck)
        .run(&with(&conf_k, "prevResult", rk).to_string())
        .expect_ok();
    // keelson removes the pair in the background right after DEL (see reaper.rs).
    wait_veths(&hk, 0);
    assert_eq!(cref.links(), ck.links());
    assert_eq!(allocations(&ref_dir), allocations(&k_dir));
}

#[test]
fn same_shape_and_state_as_reference_basic() {
    side_by_side(json!({}));
}

#[test]
fn same_shape_and_state_as_reference_mtu_hairpin_default_gateway() {
    side_by_side(json!({"mtu": 1400, "hairpinMode": true, "isDefaultGateway": true}));
}
