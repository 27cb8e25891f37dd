//! A network configuration list as containerd (libcni) runs it: each plugin gets its entry with
//! the list's name and cniVersion injected, and the previous plugin's result as prevResult.
//! Here keelson-cni is followed by the reference `tuning` plugin, and `loopback` is ours.

mod common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

/// The configuration libcni hands to plugin `i` of `list`.
fn entry(list: &Value, i: usize, prev: Option<&Value>) -> Value {
    let mut c = list["plugins"][i].clone();
    c["name"] = list["name"].clone();
    c["cniVersion"] = list["cniVersion"].clone();
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    c
}

#[test]
fn keelson_then_reference_tuning_chain_add_check_del() {
    require_root_and_tools(&["ip", "nsenter"]);
    assert!(
        Path::new("/usr/lib/cni/tuning").is_file(),
        "reference plugins missing: apt-get install containernetworking-plugins"
    );
    let host = TestHost::create("host");
    let ctr = TestHost::create("c");
    let data = tempfile::tempdir().expect("tempdir");
    let aliases = alias_dir(&["keelson-cni", "loopback"]);
    let bin_dir = format!("{}:/usr/lib/cni", aliases.path().display());
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "kcchain",
        "plugins": [
            {"type": "keelson-cni", "bridge": "kcbr6", "isGateway": true, "ipMasq": false,
             "ipam": {"type": "keelson-ipam", "subnet": "10.96.0.0/24", "dataDir": data.path().to_str().unwrap(),
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "tuning", "sysctl": {"net.core.somaxconn": "517"}}
        ]
    });
    let run = |plugin: &str, cmd: &str, ifname: &str, conf: &Value| {
        let bin = if plugin == "tuning" {
            Path::new("/usr/lib/cni/tuning").to_path_buf()
        } else {
            aliases.path().join(plugin)
        };
        Call::new(&bin, &host, cmd, "chain-1")
            .netns(&ctr)
            .ifname(ifname)
            .cni_path(&bin_dir)
            .run(&conf.to_string())
    };

    // Loopback first, as containerd does, from its own one-plugin list.
    let lo = json!({"cniVersion": "1.0.0", "name": "cni-loopback", "type": "loopback"});
    run("loopback", "ADD", "lo", &lo).expect_ok();

    let first = run("keelson-cni", "ADD", "eth0", &entry(&list, 0, None))
        .expect_ok()
        .json();
    let second = run("tuning", "ADD", "eth0", &entry(&list, 1, Some(&first)))
        .expect_ok()
        .json();
    // tuning passes our result through: the runtime's final result is ours.
    assert_eq!(second["ips"], first["ips"]);
    assert_eq!(second["interfaces"], first["interfaces"]);
    let somaxconn = ctr.sh("cat /proc/sys/net/core/somaxconn");
    assert_eq!(String::from_utf8_lossy(&somaxconn.stdout).trim(), "517");
    assert!(ctr.ip(&["-o", "link", "show", "lo"]).contains("UP"));

    // CHECK and DEL walk the list with the cached final result.
    for i in 0..2 {
        let plugin = if i == 0 { "keelson-cni" } else { "tuning" };
        run(plugin, "CHECK", "eth0", &entry(&list, i, Some(&second))).expect_ok();
    }
    for i in (0..2).rev() {
        let plugin = if i == 0 { "keelson-cni" } else { "tuning" };
        run(plugin, "DEL", "eth0", &entry(&list, i, Some(&second))).expect_ok();
    }
    run("loopback", "DEL", "lo", &lo).expect_ok();
    wait_veths(&host, 0);
    assert!(allocations(&data.path().join("kcchain")).is_empty());
    assert_eq!(ctr.links(), ["lo"]);
}
