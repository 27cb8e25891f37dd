//! The loopback plugin (same binary under the name `loopback`), against the reference one.

mod common;

use std::path::Path;

use common::*;
use serde_json::json;

#[test]
fn loopback_up_down_check_like_reference() {
    require_root_and_tools(&["ip", "nsenter"]);
    let host = TestHost::create("host");
    let aliases = alias_dir(&["loopback"]);
    let ours = aliases.path().join("loopback");
    let conf = json!({"cniVersion": "1.0.0", "name": "lo", "type": "loopback"}).to_string();
    let (a, b) = (TestHost::create("a"), TestHost::create("b"));
    // Test hosts come with lo up; the plugin is to bring it up.
    for ns in [&a, &b] {
        ns.ip(&["link", "set", "lo", "down"]);
    }
    let mine = Call::new(&ours, &host, "ADD", "lo-1")
        .netns(&a)
        .ifname("lo")
        .run(&conf)
        .expect_ok()
        .json();
    let reference = Call::new(Path::new("/usr/lib/cni/loopback"), &host, "ADD", "lo-1")
        .netns(&b)
        .ifname("lo")
        .run(&conf)
        .expect_ok()
        .json();
    assert_eq!(mine["ips"], reference["ips"]);
    assert_eq!(mine["interfaces"][0]["name"], "lo");
    assert!(a.ip(&["-o", "link", "show", "lo"]).contains("UP"));
    assert_eq!(
        a.ip(&["-o", "link", "show", "lo"]).contains("LOWER_UP"),
        b.ip(&["-o", "link", "show", "lo"]).contains("LOWER_UP")
    );
    Call::new(&ours, &host, "CHECK", "lo-1")
        .netns(&a)
        .ifname("lo")
        .run(&conf)
        .expect_ok();
    Call::new(&ours, &host, "DEL", "lo-1")
        .netns(&a)
        .ifname("lo")
        .run(&conf)
        .expect_ok();
    let bad = Call::new(&ours, &host, "CHECK", "lo-1")
        .netns(&a)
        .ifname("lo")
        .run(&conf);
    assert_eq!(bad.code(), 102);
    // DEL after the namespace is gone still succeeds.
    let mut gone = Call::new(&ours, &host, "DEL", "lo-1").ifname("lo");
    gone.netns = Some("/var/run/netns/kc-gone".into());
    gone.run(&conf).expect_ok();
}
