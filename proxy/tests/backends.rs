//! Backend behaviour with a recording fake runner: canary, fallbacks, stale chains, shared
//! elements and affinity clean-up.

mod corpus;

use keelson_proxy::backend::{RuleBackend, SyncScope};
use keelson_proxy::exec::{CmdOutput, FakeRunner};
use keelson_proxy::iptables::render::RenderOptions as IptOptions;
use keelson_proxy::iptables::{IptablesBackend, Variant};
use keelson_proxy::model::ProxyModel;
use keelson_proxy::nftables::render::RenderOptions as NftOptions;
use keelson_proxy::nftables::NftBackend;

fn ok(stdout: &str) -> CmdOutput {
    CmdOutput {
        status: 0,
        stdout: stdout.into(),
        stderr: String::new(),
    }
}

fn fail() -> CmdOutput {
    CmdOutput {
        status: 1,
        stdout: String::new(),
        stderr: "boom".into(),
    }
}

fn ipt(r: &FakeRunner) -> IptablesBackend {
    IptablesBackend::new(Box::new(r.clone()), Variant::Nft, IptOptions::default())
}

fn nft(r: &FakeRunner) -> NftBackend {
    NftBackend::new(Box::new(r.clone()), NftOptions::default())
}

fn partial(old: &ProxyModel, new: &ProxyModel) -> SyncScope {
    SyncScope::Partial(old.changed_services(new))
}

fn without(m: &ProxyModel, name: &str) -> ProxyModel {
    let mut m = m.clone();
    m.services.retain(|k, _| k.name != name);
    m
}

#[test]
fn iptables_canary_present_then_flushed() {
    let r = FakeRunner::default();
    let mut b = ipt(&r);
    assert!(
        !b.rules_lost().expect("check"),
        "nothing written yet, nothing to lose"
    );
    b.sync(&corpus::model(), &SyncScope::Full).expect("sync");
    r.answer("iptables-nft -w 5 -t", ok("-N KUBE-PROXY-CANARY\n-A KUBE-PROXY-CANARY -m comment --comment \"keelson-proxy canary\" -j RETURN\n"));
    assert!(!b.rules_lost().expect("check"));
    r.answers.lock().expect("lock").clear();
    r.answer("iptables-nft -w 5 -t", ok("-N KUBE-PROXY-CANARY\n"));
    assert!(
        b.rules_lost().expect("check"),
        "an empty canary chain means a flush"
    );
    // After a loss, even a partial request becomes a full sync (it reads iptables-save).
    r.take_calls();
    let m = corpus::model();
    let stats = b
        .sync(&without(&m, "web"), &partial(&m, &without(&m, "web")))
        .expect("sync");
    assert!(stats.full);
    assert!(r
        .take_calls()
        .iter()
        .any(|c| c.program == "iptables-nft-save"));
}

#[test]
fn iptables_removed_service_chains_are_deleted_in_a_partial_sync() {
    let r = FakeRunner::default();
    let mut b = ipt(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.take_calls();
    let n = without(&m, "sticky");
    let stats = b.sync(&n, &partial(&m, &n)).expect("sync");
    assert!(!stats.full);
    let calls = r.take_calls();
    assert_eq!(calls.len(), 1);
    let text = &calls[0].stdin;
    // sticky's cluster chain, external chain and both endpoint chains go away.
    assert_eq!(
        text.lines().filter(|l| l.starts_with("-X KUBE-")).count(),
        4,
        "{text}"
    );
    assert!(!text.contains("default/sticky"));
    // Unchanged services keep their chains untouched: no declaration of web's chains.
    assert!(!text.contains(":KUBE-SVC-TL6HGMALSKADNKEV"));
}

#[test]
fn iptables_failed_partial_sync_falls_back_to_full() {
    let r = FakeRunner::default();
    let mut b = ipt(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.answer("iptables-nft-restore", fail());
    let n = without(&m, "web");
    assert!(b.sync(&n, &partial(&m, &n)).is_err(), "both attempts fail");
    let calls = r.take_calls();
    let progs: Vec<&str> = calls.iter().map(|c| c.program.as_str()).collect();
    // full sync; failed partial restore; fallback full sync (save + restore, failing too).
    assert_eq!(
        progs,
        [
            "iptables-nft-save",
            "iptables-nft-restore",
            "iptables-nft-restore",
            "iptables-nft-save",
            "iptables-nft-restore"
        ]
    );
}

#[test]
fn nft_canary_and_fallback_to_full() {
    let r = FakeRunner::default();
    let mut b = nft(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.answer("nft list set ip keelson canary", ok("table ip keelson {\n\tset canary {\n\t\ttype mark\n\t\telements = { 0x00000001 }\n\t}\n}\n"));
    assert!(!b.rules_lost().expect("check"));
    r.answers.lock().expect("lock").clear();
    r.answer("nft list set ip keelson canary", fail());
    assert!(b.rules_lost().expect("check"));
    r.answers.lock().expect("lock").clear();
    r.take_calls();
    let n = without(&m, "web");
    let stats = b.sync(&n, &partial(&m, &n)).expect("sync");
    assert!(stats.full, "after a loss the next sync is full");
    let loads: Vec<_> = r
        .take_calls()
        .into_iter()
        .filter(|c| c.program == "nft" && !c.stdin.is_empty())
        .collect();
    assert_eq!(loads.len(), 1);
    assert!(loads[0]
        .stdin
        .starts_with("add table ip keelson\nflush table ip keelson\n"));
}

#[test]
fn nft_shared_pod_ip_keeps_its_hairpin_element() {
    let r = FakeRunner::default();
    let mut b = nft(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.take_calls();
    // web:metrics and web:http share their pods; removing one port keeps the pods' hairpin.
    let mut n = m.clone();
    n.services
        .retain(|k, _| !(k.name == "web" && k.port_name == "metrics"));
    b.sync(&n, &partial(&m, &n)).expect("sync");
    let text = r.take_calls().pop().expect("one call").stdin;
    assert!(!text.contains("hairpin"), "{text}");
    assert!(text.contains("10.96.0.10 . tcp . 9100"));
    // Removing the other port too deletes them.
    let mut o = n.clone();
    o.services.retain(|k, _| k.name != "web");
    b.sync(&o, &partial(&n, &o)).expect("sync");
    let text = r.take_calls().pop().expect("one call").stdin;
    assert!(text.contains("delete element ip keelson hairpin { 10.244.1.2 . 10.244.1.2, 10.244.2.4 . 10.244.2.4 }"), "{text}");
}

#[test]
fn nft_affinity_entries_of_a_removed_endpoint_are_deleted() {
    let r = FakeRunner::default();
    let mut b = nft(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.take_calls();
    r.answer("nft list map ip keelson affinity", ok("table ip keelson {\n\tmap affinity {\n\t\telements = { 192.168.77.2 . 10.96.0.20 . tcp . 80 expires 9m : 10.244.2.6 . 8080, 192.168.77.3 . 10.96.0.20 . tcp . 80 expires 9m : 10.244.1.6 . 8080 }\n\t}\n}\n"));
    let mut n = m.clone();
    for sp in n.services.values_mut().filter(|s| s.name.name == "sticky") {
        sp.endpoints.retain(|e| e.ip.to_string() != "10.244.2.6");
    }
    b.sync(&n, &partial(&m, &n)).expect("sync");
    let load = r
        .take_calls()
        .into_iter()
        .find(|c| c.program == "nft" && !c.stdin.is_empty())
        .expect("load");
    assert!(
        load.stdin.contains(
            "delete element ip keelson affinity { 192.168.77.2 . 10.96.0.20 . tcp . 80 }"
        ),
        "{}",
        load.stdin
    );
    assert!(!load.stdin.contains("192.168.77.3"));
}

#[test]
fn nft_unchanged_model_writes_nothing_in_a_partial_sync() {
    let r = FakeRunner::default();
    let mut b = nft(&r);
    let m = corpus::model();
    b.sync(&m, &SyncScope::Full).expect("sync");
    r.take_calls();
    let stats = b.sync(&m, &SyncScope::Partial(Vec::new())).expect("sync");
    assert_eq!(stats.written, 0);
    assert!(r.take_calls().is_empty());
}

#[test]
fn iptables_variant_autodetect_follows_existing_rules() {
    use keelson_proxy::iptables::detect_variant;
    let r = FakeRunner::default();
    assert_eq!(
        detect_variant(&r),
        Variant::Nft,
        "no rules anywhere: nf_tables"
    );
    r.answer(
        "iptables-legacy-save",
        ok("*nat\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n"),
    );
    assert_eq!(
        detect_variant(&r),
        Variant::Legacy,
        "Kubernetes rules in legacy tables"
    );
    r.answer("iptables-nft-save", ok("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-NODEPORTS - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n"));
    assert_eq!(
        detect_variant(&r),
        Variant::Nft,
        "more of them in nf_tables"
    );
}
