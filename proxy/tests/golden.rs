//! Golden-text tests: the corpus rendered by each backend, compared with files under
//! tests/golden/. Run with UPDATE_GOLDEN=1 to rewrite the files after an intended change
//! (then read the diff: the files are the specification).

mod corpus;

use std::path::PathBuf;

use keelson_proxy::backend::{RuleBackend, SyncScope};
use keelson_proxy::exec::{CmdOutput, FakeRunner, RecordedCmd};
use keelson_proxy::iptables::render::RenderOptions as IptOptions;
use keelson_proxy::iptables::{IptablesBackend, Variant};
use keelson_proxy::model::ServicePortName;
use keelson_proxy::nftables::render::RenderOptions as NftOptions;
use keelson_proxy::nftables::NftBackend;

fn cidr() -> Option<keelson_proxy::cidr::Ipv4Cidr> {
    Some("10.244.0.0/16".parse().expect("cidr"))
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "missing golden file {}: {e} (UPDATE_GOLDEN=1 creates it)",
            path.display()
        )
    });
    if expected != actual {
        for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
            if e != a {
                panic!(
                    "{name}: first difference at line {}:\n expected: {e}\n   actual: {a}",
                    i + 1
                );
            }
        }
        panic!(
            "{name}: line counts differ: expected {}, actual {}",
            expected.lines().count(),
            actual.lines().count()
        );
    }
}

fn runner() -> FakeRunner {
    FakeRunner::default()
}

fn iptables(r: &FakeRunner) -> IptablesBackend {
    IptablesBackend::new(
        Box::new(r.clone()),
        Variant::Nft,
        IptOptions {
            cluster_cidr: cidr(),
        },
    )
}

fn nft(r: &FakeRunner) -> NftBackend {
    NftBackend::new(
        Box::new(r.clone()),
        NftOptions {
            cluster_cidr: cidr(),
        },
    )
}

fn changed() -> Vec<ServicePortName> {
    corpus::model().changed_services(&corpus::changed_model())
}

/// The stdin of the only call to `program` among `calls`.
fn only_load(calls: &[RecordedCmd], program: &str) -> String {
    let loads: Vec<&RecordedCmd> = calls
        .iter()
        .filter(|c| c.program == program && !c.stdin.is_empty())
        .collect();
    assert_eq!(
        loads.len(),
        1,
        "expected exactly one {program} load, got {calls:#?}"
    );
    loads[0].stdin.clone()
}

/// The corpus change as a partial sync: one call to `program` and nothing else, its text as in
/// the golden file.
fn partial_sync_is_one_load(b: &mut dyn RuleBackend, r: &FakeRunner, program: &str, golden: &str) {
    let stats = b
        .sync(&corpus::changed_model(), &SyncScope::Partial(changed()))
        .expect("partial sync");
    assert!(!stats.full);
    let calls = r.take_calls();
    assert_eq!(
        calls.len(),
        1,
        "a partial sync is one {program} call and nothing else"
    );
    check(golden, &only_load(&calls, program));
}

#[test]
fn corpus_covers_the_features() {
    let m = corpus::model();
    // headless and ExternalName are skipped; web and dns have two ports each.
    assert_eq!(m.services.len(), 10);
    assert!(m
        .services
        .keys()
        .all(|k| k.name != "headless" && k.name != "alias"));
    // The endpoint that turned ready backs both ports of "web".
    assert_eq!(changed().len(), 2);
}

#[test]
fn iptables_full_and_partial_sync_text() {
    let r = runner();
    let mut b = iptables(&r);
    let stats = b
        .sync(&corpus::model(), &SyncScope::Full)
        .expect("full sync");
    assert!(stats.full);
    check(
        "iptables-full.txt",
        &only_load(&r.take_calls(), "iptables-nft-restore"),
    );
    partial_sync_is_one_load(&mut b, &r, "iptables-nft-restore", "iptables-partial.txt");
}

#[test]
fn iptables_full_sync_removes_only_own_stale_chains() {
    let r = runner();
    let saved = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SVC-STALESTALESTALE - [0:0]\n:KUBE-SEP-STALESTALESTALE - [0:0]\n:CNI-ABC - [0:0]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n";
    r.answer(
        "iptables-nft-save",
        CmdOutput {
            status: 0,
            stdout: saved.into(),
            stderr: String::new(),
        },
    );
    let mut b = iptables(&r);
    b.sync(&corpus::model(), &SyncScope::Full)
        .expect("full sync");
    check(
        "iptables-full-stale.txt",
        &only_load(&r.take_calls(), "iptables-nft-restore"),
    );
}

#[test]
fn nftables_full_and_partial_sync_text() {
    let r = runner();
    let mut b = nft(&r);
    b.sync(&corpus::model(), &SyncScope::Full)
        .expect("full sync");
    check("nftables-full.txt", &only_load(&r.take_calls(), "nft"));
    partial_sync_is_one_load(&mut b, &r, "nft", "nftables-partial.txt");
}
