//! ADD, DEL, GC and CHECK of the bridge plugin against the fake kernel and firewall: no root.

use serde_json::{json, Value};

use super::bridge_add::add_with;
use super::bridge_check::check_with;
use super::bridge_del::{del_with, gc_with};
use super::ipam_backend::IpamBackend;
use super::{Node, Request};
use crate::config::NetConf;
use crate::env::CniEnv;
use crate::error::{code, CniError};
use crate::kernel::fake::{FakeKernel, FakeNs};
use crate::kernel::fake_firewall::FakeFirewall;
use crate::kernel::Side;
use crate::names::host_veth;
use crate::result::CniResult;

struct TestNode {
    kernel: FakeKernel,
    fw: FakeFirewall,
    conf: NetConf,
    stdin: Vec<u8>,
    data: tempfile::TempDir,
}

fn node(extra: Value) -> TestNode {
    let data = tempfile::tempdir().expect("tempdir");
    let mut conf = json!({
        "cniVersion": "1.1.0", "name": "kcnet", "type": "keelson-cni", "bridge": "kcbr0",
        "isGateway": true,
        "ipam": {"type": "keelson-ipam", "subnet": "10.77.0.0/24",
                 "dataDir": data.path(), "routes": [{"dst": "0.0.0.0/0"}]}
    });
    for (k, v) in extra.as_object().expect("an object") {
        conf[k] = v.clone();
    }
    let stdin = conf.to_string().into_bytes();
    TestNode {
        kernel: FakeKernel::new(),
        fw: FakeFirewall::default(),
        conf: NetConf::parse(&stdin).expect("valid configuration"),
        stdin,
        data,
    }
}

fn env(id: &str, ifname: &str) -> CniEnv {
    CniEnv {
        container_id: id.into(),
        netns: "/var/run/netns/fake".into(),
        ifname: ifname.into(),
        ..Default::default()
    }
}

impl TestNode {
    /// Runs one plugin command for the attachment `env` on this node.
    fn run<T>(
        &mut self,
        env: &CniEnv,
        command: impl FnOnce(Node, &IpamBackend, &Request) -> Result<T, CniError>,
    ) -> Result<T, CniError> {
        let ipam = IpamBackend::from_conf(&self.conf)?;
        let req = Request {
            env,
            conf: &self.conf,
            stdin: &self.stdin,
        };
        let node = Node {
            kernel: &mut self.kernel,
            fw: &self.fw,
        };
        command(node, &ipam, &req)
    }

    fn add(&mut self, env: &CniEnv) -> Result<CniResult, CniError> {
        self.run(env, add_with)
    }

    fn del(&mut self, env: &CniEnv) -> Result<(), CniError> {
        self.run(env, del_with)
    }

    /// IPs with an allocation file.
    fn allocations(&self) -> Vec<String> {
        let mut ips: Vec<String> = std::fs::read_dir(self.data.path().join("kcnet"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                    .collect()
            })
            .unwrap_or_default();
        ips.sort();
        ips
    }

    fn container(&self) -> &FakeNs {
        self.kernel.container.as_ref().expect("container namespace")
    }

    /// Everything a test can see: both namespaces, the nat tables, the allocations.
    fn state(&self) -> String {
        format!(
            "{:?}\n{:?}\n{:?} {:?}\n{:?}",
            self.kernel.host,
            self.kernel.container,
            self.fw.table(false),
            self.fw.table(true),
            self.allocations()
        )
    }
}

#[test]
fn add_builds_bridge_pair_addresses_routes_and_reports_them() {
    let mut n = node(json!({"hairpinMode": true, "mtu": 1400, "ipMasq": true}));
    let e = env("ctr-a", "eth0");
    let r = n.add(&e).expect("ADD");

    let names: Vec<&str> = r.interfaces.iter().map(|i| i.name.as_str()).collect();
    let veth = host_veth("ctr-a", "eth0");
    assert_eq!(names, ["kcbr0", veth.as_str(), "eth0"]);
    assert_eq!(r.interfaces[2].sandbox, e.netns);
    assert_eq!(r.ips[0].address.to_string(), "10.77.0.2/24");
    assert_eq!(r.ips[0].interface, Some(2));
    assert_eq!(r.routes[0].dst.to_string(), "0.0.0.0/0");

    let bridge = n.kernel.host.get("kcbr0").expect("bridge");
    assert!(bridge.details.up);
    assert_eq!(bridge.details.mtu, 1400);
    assert_eq!(bridge.addresses, ["10.77.0.1/24".parse().unwrap()]);
    let port = n.kernel.host.get(&veth).expect("host end");
    assert_eq!(port.details.master, Some(bridge.details.index));
    assert!(port.details.up && port.hairpin);
    assert_eq!(port.details.mac, r.interfaces[1].mac);

    let eth0 = n.container().get("eth0").expect("container end");
    assert!(eth0.details.up);
    assert_eq!(
        (eth0.details.mtu, &eth0.details.mac),
        (1400, &r.interfaces[2].mac)
    );
    assert_eq!(eth0.addresses, ["10.77.0.2/24".parse().unwrap()]);
    let route = &n.container().routes[0];
    assert_eq!(route.gw, Some("10.77.0.1".parse().unwrap()));
    assert_eq!(route.oif, Some(eth0.details.index));

    assert_eq!(n.kernel.forwarding, (true, false));
    assert_eq!(n.allocations(), ["10.77.0.2"]);
    let nat = n.fw.table(false);
    assert_eq!(nat.chains.len(), 1, "{nat:?}");
    assert!(
        nat.rules.iter().any(|r| r.contains("-s 10.77.0.2/32")),
        "{nat:?}"
    );
}

/// Each step of ADD failing in turn, on a node that already holds another attachment.
#[test]
fn add_failing_midway_undoes_its_own_work_and_keeps_what_was_there() {
    let steps = [
        "create_veth",
        "set_hairpin",
        "set_up Container",
        "add_address Container",
        "add_route Container",
        "ensure_forwarding",
        "firewall",
    ];
    for step in steps {
        let mut n = node(json!({"hairpinMode": true, "ipMasq": true}));
        n.add(&env("ctr-a", "eth0")).expect("first ADD");
        let before = n.state();
        if step == "firewall" {
            n.fw.broken.set(Some(false));
        } else {
            n.kernel.fail_on(step, libc::EPERM);
        }

        let err = n.add(&env("ctr-b", "net1")).expect_err(step);
        let want = if step == "firewall" {
            code::FIREWALL
        } else if step == "ensure_forwarding" {
            code::IO_FAILURE
        } else {
            code::NETLINK
        };
        assert_eq!(err.code, want, "{step}: {err}");
        assert_eq!(n.state(), before, "{step}: journal {:#?}", n.kernel.journal);
    }
}

#[test]
fn add_rollback_removes_a_half_installed_masquerade() {
    let mut n = node(json!({"ipMasq": true, "ipam": {"type": "keelson-ipam",
        "ranges": [[{"subnet": "10.77.0.0/24"}], [{"subnet": "fd00:77::/64"}]]}}));
    let dir = n.data.path().to_str().unwrap().to_string();
    n.conf.ipam.as_mut().unwrap().data_dir = Some(dir);
    n.fw.broken.set(Some(true));
    let err = n.add(&env("ctr-a", "eth0")).expect_err("v6 rules fail");
    assert_eq!(err.code, code::FIREWALL);
    assert_eq!(n.fw.table(false).chains, Vec::<String>::new());
    assert_eq!(n.fw.table(false).rules, Vec::<String>::new());
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0"]);
    assert_eq!(n.container().names(), ["lo"]);
    assert!(n.allocations().is_empty());
}

#[test]
fn add_with_the_ifname_taken_keeps_that_interface() {
    let mut n = node(json!({}));
    n.kernel.existing(Side::Container, "eth0", "dummy");
    let err = n.add(&env("ctr-a", "eth0")).expect_err("eth0 is taken");
    assert_eq!(err.code, code::NETLINK);
    assert!(err.msg.contains("already exists"), "{err}");
    assert_eq!(n.container().names(), ["lo", "eth0"]);
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0"]);
    assert!(n.allocations().is_empty());
}

#[test]
fn add_on_a_link_that_is_not_a_bridge_fails_as_config_and_leaves_it() {
    let mut n = node(json!({}));
    n.kernel.existing(Side::Host, "kcbr0", "dummy");
    let err = n
        .add(&env("ctr-a", "eth0"))
        .expect_err("kcbr0 is no bridge");
    assert_eq!(err.code, code::INVALID_CONFIG);
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0"]);
    assert!(n.allocations().is_empty());
}

#[test]
fn add_replaces_a_stale_pair_of_the_same_attachment() {
    let mut n = node(json!({}));
    let stale = host_veth("ctr-a", "eth0");
    n.kernel.existing(Side::Host, &stale, "veth");
    n.add(&env("ctr-a", "eth0")).expect("ADD");
    let journal = n.kernel.journal.join("\n");
    assert!(
        journal.contains(&format!("delete_link Host {stale}")),
        "{journal}"
    );
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0", stale.as_str()]);
}

#[test]
fn del_retires_the_pair_then_releases_and_is_idempotent() {
    let mut n = node(json!({"ipMasq": true}));
    let e = env("ctr-a", "eth0");
    let r = n.add(&e).expect("ADD");
    n.conf.prev_result = Some(r);
    n.del(&e).expect("DEL");
    let after = n.state();
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0"]);
    assert_eq!(n.container().names(), ["lo"]);
    assert!(n.allocations().is_empty());
    assert!(n.fw.table(false).chains.is_empty());
    assert!(n.kernel.journal.iter().any(|j| j.starts_with("retire")));

    // The second DEL finds nothing (its fast masquerade path fails) and still succeeds.
    n.del(&e).expect("second DEL");
    assert_eq!(n.state(), after);
}

#[test]
fn del_marks_the_address_unreachable_until_an_add_is_given_it_again() {
    let mut n = node(json!({}));
    // One address to hand out, so the next pod gets the same one.
    let mut conf: Value = serde_json::from_slice(&n.stdin).expect("json");
    conf["ipam"]["rangeStart"] = json!("10.77.0.2");
    conf["ipam"]["rangeEnd"] = json!("10.77.0.2");
    n.stdin = conf.to_string().into_bytes();
    n.conf = NetConf::parse(&n.stdin).expect("valid configuration");
    let a = env("ctr-a", "eth0");
    let ip = n.add(&a).expect("ADD").ips[0].address.ip();
    n.del(&a).expect("DEL");
    assert_eq!(n.kernel.unreachable, [ip]);
    let marked = n
        .kernel
        .journal
        .iter()
        .position(|j| j.starts_with("mark_unreachable"));
    let retired = n
        .kernel
        .journal
        .iter()
        .position(|j| j.starts_with("retire"));
    // Marked first: a connection attempt never meets a link that is down and unmarked.
    assert!(marked < retired, "{:?}", n.kernel.journal);

    let b = env("ctr-b", "eth0");
    let again = n.add(&b).expect("ADD of another pod").ips[0].address.ip();
    assert_eq!(again, ip);
    assert!(n.kernel.unreachable.is_empty());
    // A repeated DEL of the first pod (the runtime calls DEL again after removing its
    // namespace; the fake has one container namespace) leaves the new owner's address alone.
    n.kernel.container = None;
    n.del(&a).expect("repeated DEL");
    assert!(n.kernel.unreachable.is_empty());
}

#[test]
fn del_on_a_bridge_without_the_gateway_marks_nothing() {
    let mut n = node(json!({"isGateway": false}));
    let a = env("ctr-a", "eth0");
    n.add(&a).expect("ADD");
    n.del(&a).expect("DEL");
    assert!(n.kernel.unreachable.is_empty());
}

#[test]
fn del_with_sync_delete_deletes_at_once() {
    let mut n = node(json!({"syncDelete": true}));
    let e = env("ctr-a", "eth0");
    n.add(&e).expect("ADD");
    n.del(&e).expect("DEL");
    assert!(n
        .kernel
        .journal
        .iter()
        .any(|j| j.starts_with("delete_link_index")));
    assert!(!n.kernel.journal.iter().any(|j| j.starts_with("retire")));
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0"]);
}

#[test]
fn del_when_everything_is_gone_succeeds_without_changes() {
    let mut n = node(json!({"ipMasq": true}));
    n.kernel.container = None;
    n.del(&env("ctr-a", "eth0"))
        .expect("DEL with nothing there");
    assert!(n.kernel.journal.is_empty(), "{:?}", n.kernel.journal);
    // Without a namespace path either, as after a crash.
    let mut e = env("ctr-a", "eth0");
    e.netns.clear();
    n.del(&e).expect("DEL without netns");
}

#[test]
fn del_with_the_host_end_gone_removes_the_container_end() {
    let mut n = node(json!({}));
    let e = env("ctr-a", "eth0");
    n.add(&e).expect("ADD");
    n.kernel
        .container
        .as_mut()
        .unwrap()
        .links
        .retain(|l| l.details.name != "eth0");
    n.kernel.existing(Side::Container, "eth0", "veth");
    n.kernel
        .host
        .links
        .retain(|l| !l.details.name.starts_with("veth"));
    n.del(&e).expect("DEL");
    assert_eq!(n.container().names(), ["lo"]);
    assert!(n.allocations().is_empty());
}

#[test]
fn gc_keeps_listed_attachments_only() {
    let mut n = node(json!({"ipMasq": true}));
    n.add(&env("ctr-a", "eth0")).expect("ADD a");
    n.add(&env("ctr-b", "net1")).expect("ADD b");
    n.conf.valid_attachments = Some(vec![crate::config::Attachment {
        container_id: "ctr-a".into(),
        ifname: "eth0".into(),
    }]);
    n.run(&env("", ""), gc_with).expect("GC");
    assert_eq!(n.allocations(), ["10.77.0.2"]);
    let veth_a = host_veth("ctr-a", "eth0");
    assert_eq!(n.kernel.host.names(), ["lo", "kcbr0", veth_a.as_str()]);
    assert_eq!(n.fw.table(false).chains.len(), 1);
}

#[test]
fn check_passes_after_add_and_names_a_missing_address() {
    let mut n = node(json!({}));
    let e = env("ctr-a", "eth0");
    let prev = n.add(&e).expect("ADD");
    let check = |node: Node, _: &IpamBackend, req: &Request| check_with(node, req, &prev);
    n.run(&e, check).expect("CHECK");
    let eth0 = n.kernel.container.as_mut().unwrap().links.iter_mut();
    eth0.filter(|l| l.details.name == "eth0")
        .for_each(|l| l.addresses.clear());
    let err = n.run(&e, check).expect_err("address gone");
    assert_eq!(err.code, code::CHECK_FAILED);
    assert!(
        err.msg.contains("10.77.0.2/24") && err.msg.contains("missing"),
        "{err}"
    );
}
