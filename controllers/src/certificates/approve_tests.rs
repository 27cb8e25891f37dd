use super::*;
use crate::certificates::request::tests::csr_pem;
use crate::certificates::tests::{csr, node_csr, with};

const BOOTSTRAP_GROUPS: &[&str] = &["system:bootstrappers", "system:authenticated"];

fn approved(d: &Decision) -> bool {
    matches!(d, Decision::Approve(_))
}

#[test]
fn a_bootstrapper_asking_for_a_node_client_certificate_is_approved() {
    let d = decide(&node_csr("system:bootstrap:abcdef", BOOTSTRAP_GROUPS));
    assert_eq!(d, Decision::Approve("Auto approving kubelet client certificate for node n1: requester system:bootstrap:abcdef is in group system:bootstrappers".into()));
}

#[test]
fn a_node_renewing_its_own_certificate_is_approved_another_node_is_not() {
    let own = decide(&node_csr(
        "system:node:n1",
        &["system:nodes", "system:authenticated"],
    ));
    assert!(approved(&own), "{own:?}");
    let other = decide(&node_csr(
        "system:node:n2",
        &["system:nodes", "system:authenticated"],
    ));
    assert!(
        matches!(&other, Decision::Leave(why) if why.contains("neither")),
        "{other:?}"
    );
}

#[test]
fn plain_users_and_admins_are_left_to_a_person() {
    assert!(!approved(&decide(&node_csr(
        "jane",
        &["system:authenticated"]
    ))));
    assert!(!approved(&decide(&node_csr(
        "admin",
        &["system:masters", "system:authenticated"]
    ))));
}

#[test]
fn anything_but_exactly_a_node_client_request_is_not_approved() {
    let bootstrap = |pem: &str, usages: &[&str]| {
        decide(&csr(
            pem,
            KUBELET_CLIENT_SIGNER,
            usages,
            "system:bootstrap:abcdef",
            BOOTSTRAP_GROUPS,
        ))
    };
    let client = ["digital signature", "client auth"];
    let cases = [
        (
            "another CN",
            bootstrap(&csr_pem("admin", &["system:nodes"], &[]), &client),
        ),
        (
            "empty node name",
            bootstrap(&csr_pem("system:node:", &["system:nodes"], &[]), &client),
        ),
        (
            "extra O",
            bootstrap(
                &csr_pem("system:node:n1", &["system:nodes", "system:masters"], &[]),
                &client,
            ),
        ),
        (
            "no O",
            bootstrap(&csr_pem("system:node:n1", &[], &[]), &client),
        ),
        (
            "masters O",
            bootstrap(
                &csr_pem("system:node:n1", &["system:masters"], &[]),
                &client,
            ),
        ),
        (
            "SANs",
            bootstrap(
                &csr_pem("system:node:n1", &["system:nodes"], &["n1.example"]),
                &client,
            ),
        ),
        (
            "server auth",
            bootstrap(
                &csr_pem("system:node:n1", &["system:nodes"], &[]),
                &["digital signature", "server auth"],
            ),
        ),
        (
            "extra usage",
            bootstrap(
                &csr_pem("system:node:n1", &["system:nodes"], &[]),
                &["digital signature", "client auth", "server auth"],
            ),
        ),
        ("not PEM", bootstrap("garbage", &client)),
    ];
    for (what, d) in cases {
        assert!(matches!(d, Decision::Leave(_)), "{what}: {d:?}");
    }
    let mut serving = node_csr("system:bootstrap:abcdef", BOOTSTRAP_GROUPS);
    serving.spec.signer_name = "kubernetes.io/kubelet-serving".into();
    assert!(!approved(&decide(&serving)), "another signer");
}

#[test]
fn key_encipherment_is_also_allowed() {
    let pem = csr_pem("system:node:n1", &["system:nodes"], &[]);
    let c = csr(
        &pem,
        KUBELET_CLIENT_SIGNER,
        &["key encipherment", "digital signature", "client auth"],
        "system:bootstrap:abcdef",
        BOOTSTRAP_GROUPS,
    );
    assert!(approved(&decide(&c)));
}

#[test]
fn decided_csrs_are_not_approved_again() {
    let c = node_csr("system:bootstrap:abcdef", BOOTSTRAP_GROUPS);
    for t in ["Approved", "Denied", "Failed"] {
        assert!(!approved(&decide(&with(c.clone(), t))), "{t}");
    }
}
