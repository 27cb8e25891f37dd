use super::*;
use crate::certificates::request::tests::csr_pem;
use crate::certificates::tests::{csr, with};
use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};

const NODE_GROUPS: &[&str] = &["system:nodes", "system:authenticated"];
const USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

fn node(addresses: &[(&str, &str)]) -> Node {
    Node {
        metadata: kube::api::ObjectMeta {
            name: Some("n1".into()),
            ..Default::default()
        },
        status: Some(NodeStatus {
            addresses: Some(
                addresses
                    .iter()
                    .map(|(t, a)| NodeAddress {
                        type_: t.to_string(),
                        address: a.to_string(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn serving(sans: &[&str], user: &str, usages: &[&str]) -> CertificateSigningRequest {
    let pem = csr_pem("system:node:n1", &["system:nodes"], sans);
    csr(&pem, KUBELET_SERVING_SIGNER, usages, user, NODE_GROUPS)
}

fn n1() -> Node {
    node(&[("InternalIP", "10.0.0.5"), ("Hostname", "n1")])
}

#[test]
fn the_node_asking_for_its_own_names_and_addresses_is_approved() {
    let c = serving(&["n1", "10.0.0.5"], "system:node:n1", USAGES);
    assert_eq!(node_of(&c).as_deref(), Some("n1"));
    let d = decide(&c, Some(&n1()));
    assert!(matches!(d, Decision::Approve(_)), "{d:?}");
    let no_rsa = serving(
        &["n1"],
        "system:node:n1",
        &["digital signature", "server auth"],
    );
    assert!(matches!(decide(&no_rsa, Some(&n1())), Decision::Approve(_)));
}

#[test]
fn a_name_or_address_that_is_not_the_nodes_is_not_approved() {
    let foreign_ip = serving(&["n1", "10.0.0.9"], "system:node:n1", USAGES);
    let d = decide(&foreign_ip, Some(&n1()));
    assert!(
        matches!(&d, Decision::Leave(w) if w.contains("10.0.0.9")),
        "{d:?}"
    );
    let foreign_name = serving(&["n1", "apiserver.example"], "system:node:n1", USAGES);
    let d = decide(&foreign_name, Some(&n1()));
    assert!(
        matches!(&d, Decision::Leave(w) if w.contains("apiserver.example")),
        "{d:?}"
    );
}

#[test]
fn only_the_node_itself_may_ask_and_only_for_an_existing_node() {
    let other = serving(&["n1"], "system:node:n2", USAGES);
    assert!(matches!(decide(&other, Some(&n1())), Decision::Leave(_)));
    let admin = serving(&["n1"], "admin", USAGES);
    assert!(matches!(decide(&admin, Some(&n1())), Decision::Leave(_)));
    let own = serving(&["n1"], "system:node:n1", USAGES);
    assert!(matches!(&decide(&own, None), Decision::Leave(w) if w.contains("does not exist")));
}

#[test]
fn malformed_serving_requests_are_not_approved() {
    let no_sans = serving(&[], "system:node:n1", USAGES);
    assert!(
        matches!(&decide(&no_sans, Some(&n1())), Decision::Leave(w) if w.contains("at least one"))
    );
    let client_usages = serving(
        &["n1"],
        "system:node:n1",
        &["digital signature", "client auth"],
    );
    assert!(matches!(
        decide(&client_usages, Some(&n1())),
        Decision::Leave(_)
    ));
    let pem = csr_pem("system:node:n1", &["system:masters"], &["n1"]);
    let wrong_org = csr(
        &pem,
        KUBELET_SERVING_SIGNER,
        USAGES,
        "system:node:n1",
        NODE_GROUPS,
    );
    assert!(matches!(
        decide(&wrong_org, Some(&n1())),
        Decision::Leave(_)
    ));
    let decided = with(serving(&["n1"], "system:node:n1", USAGES), "Denied");
    assert!(matches!(decide(&decided, Some(&n1())), Decision::Leave(_)));
    assert_eq!(node_of(&decided), None);
}
