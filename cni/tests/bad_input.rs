//! Bad input: each case gives the spec's error code, a message naming the problem, and leaves
//! nothing behind (no links, no allocations).

mod common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

struct Case {
    host: TestHost,
    ctr: TestHost,
    data: tempfile::TempDir,
}

fn case() -> Case {
    require_root_and_tools(&["ip", "nsenter"]);
    Case {
        host: TestHost::create("host"),
        ctr: TestHost::create("c"),
        data: tempfile::tempdir().expect("tempdir"),
    }
}

fn good_conf(data: &Path) -> Value {
    bridge_conf(
        "keelson-cni",
        "keelson-ipam",
        "kcbad",
        "kcbr9",
        "10.90.0.0/24",
        data,
        json!({}),
    )
}

impl Case {
    /// `shared`: host links that are not the attachment's own (the bridge, links the test made).
    fn assert_nothing_left(&self, shared: &[&str]) {
        let host_links = self.host.links();
        let allowed: Vec<&str> = ["lo"].iter().chain(shared).copied().collect();
        assert!(
            host_links.iter().all(|l| allowed.contains(&l.as_str())),
            "left in host: {host_links:?}"
        );
        assert_eq!(self.ctr.links(), ["lo"], "left in container");
        assert!(
            allocations(&self.data.path().join("kcbad")).is_empty(),
            "allocation left"
        );
    }

    fn add(&self, stdin: &str) -> Run {
        Call::new(&keelson_bin(), &self.host, "ADD", "bad-1")
            .netns(&self.ctr)
            .run(stdin)
    }
}

fn msg(r: &Run) -> String {
    r.json()["msg"].as_str().unwrap_or_default().to_string()
}

#[test]
fn malformed_stdin_is_code_6() {
    let c = case();
    let r = c.add("{\"cniVersion\": \"1.0.0\", \"name\": ");
    assert_eq!(r.code(), 6);
    assert!(
        msg(&r).contains("decode the network configuration"),
        "{}",
        msg(&r)
    );
    c.assert_nothing_left(&[]);
}

#[test]
fn missing_netns_is_code_4() {
    let c = case();
    let r = Call::new(&keelson_bin(), &c.host, "ADD", "bad-2")
        .run(&good_conf(c.data.path()).to_string());
    assert_eq!(r.code(), 4);
    assert!(msg(&r).contains("CNI_NETNS"), "{}", msg(&r));
    c.assert_nothing_left(&[]);
}

#[test]
fn netns_that_does_not_exist_is_code_3() {
    let c = case();
    let bin = keelson_bin();
    let mut call = Call::new(&bin, &c.host, "ADD", "bad-3");
    call.netns = Some("/var/run/netns/kc-does-not-exist".into());
    let r = call.run(&good_conf(c.data.path()).to_string());
    assert_eq!(r.code(), 3);
    assert!(msg(&r).contains("kc-does-not-exist"), "{}", msg(&r));
    c.assert_nothing_left(&[]);
}

#[test]
fn unknown_cni_version_is_code_1() {
    let c = case();
    let conf = with(&good_conf(c.data.path()), "cniVersion", json!("4.2.0"));
    let r = c.add(&conf.to_string());
    assert_eq!(r.code(), 1);
    assert!(msg(&r).contains("4.2.0"), "{}", msg(&r));
    c.assert_nothing_left(&[]);
}

#[test]
fn invalid_subnet_is_code_7() {
    let c = case();
    let mut conf = good_conf(c.data.path());
    conf["ipam"]["subnet"] = json!("10.90.0.0/33");
    let r = c.add(&conf.to_string());
    assert_eq!(r.code(), 7);
    assert!(msg(&r).contains("10.90.0.0/33"), "{}", msg(&r));
    c.assert_nothing_left(&[]);
}

#[test]
fn invalid_ifname_is_code_4() {
    let c = case();
    let r = Call::new(&keelson_bin(), &c.host, "ADD", "bad-5")
        .netns(&c.ctr)
        .ifname("much-too-long-name0")
        .run(&good_conf(c.data.path()).to_string());
    assert_eq!(r.code(), 4);
    assert!(msg(&r).contains("much-too-long-name0"), "{}", msg(&r));
    c.assert_nothing_left(&[]);
}

#[test]
fn taken_ifname_in_container_rolls_back_address_and_veth() {
    let c = case();
    // (No dummy driver on these kernels: a veth pair stands in for any existing link.)
    c.ctr.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "kcpeer0",
    ]);
    let r = c.add(&good_conf(c.data.path()).to_string());
    assert_eq!(r.code(), 100);
    assert!(msg(&r).contains("eth0 already exists"), "{}", msg(&r));
    c.ctr.ip(&["link", "del", "eth0"]);
    // The bridge is shared infrastructure and may stay; the attachment's own state may not.
    c.assert_nothing_left(&["kcbr9"]);
}

#[test]
fn bridge_name_taken_by_other_link_rolls_back() {
    let c = case();
    c.host.ip(&[
        "link", "add", "kcbr9", "type", "veth", "peer", "name", "kcbr9p",
    ]);
    let r = c.add(&good_conf(c.data.path()).to_string());
    assert_eq!(r.code(), 7);
    assert!(
        msg(&r).contains("kcbr9") && msg(&r).contains("not a bridge"),
        "{}",
        msg(&r)
    );
    c.assert_nothing_left(&["kcbr9", "kcbr9p"]);
}

#[test]
fn unknown_command_is_code_4_and_version_answers() {
    let c = case();
    let r = Call::new(&keelson_bin(), &c.host, "FROB", "x").run("{}");
    assert_eq!(r.code(), 4);
    let v = Call::new(&keelson_bin(), &c.host, "VERSION", "")
        .run("{\"cniVersion\":\"1.0.0\"}")
        .expect_ok()
        .json();
    assert_eq!(v["cniVersion"], "1.0.0");
    let supported: Vec<&str> = v["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert!(
        supported.contains(&"1.0.0") && supported.contains(&"1.1.0"),
        "{supported:?}"
    );
}
