use super::*;
use crate::certificates::request::tests::csr_pem;
use k8s_openapi::ByteString;

/// A CSR object as the API server stores it (spec.username and groups set from the requester).
pub(crate) fn csr(pem: &str, signer: &str, usages: &[&str], user: &str, groups: &[&str]) -> Csr {
    serde_json::from_value(json!({
        "metadata": {"name": "node-csr-x", "resourceVersion": "5"},
        "spec": {
            "request": keelson_apimachinery::base64::encode(pem.as_bytes()),
            "signerName": signer,
            "usages": usages,
            "username": user,
            "groups": groups,
        },
    }))
    .unwrap()
}

pub(crate) fn node_csr(user: &str, groups: &[&str]) -> Csr {
    let pem = csr_pem("system:node:n1", &["system:nodes"], &[]);
    csr(
        &pem,
        KUBELET_CLIENT_SIGNER,
        &["digital signature", "client auth"],
        user,
        groups,
    )
}

pub(crate) fn with(mut c: Csr, type_: &str) -> Csr {
    let cond = serde_json::from_value(condition(type_, "Test", "by the test")).unwrap();
    c.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(cond);
    c
}

const BOOTSTRAPPER: (&str, &[&str]) = (
    "system:bootstrap:abcdef",
    &["system:bootstrappers", "system:authenticated"],
);

#[test]
fn state_follows_conditions_and_certificate() {
    let c = node_csr(BOOTSTRAPPER.0, BOOTSTRAPPER.1);
    assert_eq!(csr_state(&c), State::Pending);
    assert_eq!(csr_state(&with(c.clone(), "Approved")), State::Approved);
    assert_eq!(
        csr_state(&with(with(c.clone(), "Approved"), "Denied")),
        State::Denied
    );
    assert_eq!(csr_state(&with(c.clone(), "Failed")), State::Failed);
    let mut issued = with(c, "Approved");
    issued.status.as_mut().unwrap().certificate = Some(ByteString(b"pem".to_vec()));
    assert_eq!(csr_state(&issued), State::Issued);
}

#[test]
fn only_approved_client_csrs_are_signed() {
    let c = node_csr(BOOTSTRAPPER.0, BOOTSTRAPPER.1);
    assert_eq!(plan_signing(&c), SignDecision::Leave, "not approved yet");
    assert!(matches!(
        plan_signing(&with(c.clone(), "Approved")),
        SignDecision::Sign(_)
    ));
    let denied = with(with(c.clone(), "Approved"), "Denied");
    assert_eq!(plan_signing(&denied), SignDecision::Leave);
    let mut other = with(c, "Approved");
    other.spec.signer_name = "example.com/serving".into();
    assert_eq!(
        plan_signing(&other),
        SignDecision::Leave,
        "another signer's"
    );
}

#[test]
fn approved_but_invalid_requests_fail_with_the_reason() {
    let pem = csr_pem("system:node:n1", &["system:nodes"], &[]);
    let server = csr(
        &pem,
        KUBELET_CLIENT_SIGNER,
        &["digital signature", "server auth"],
        "admin",
        &[],
    );
    match plan_signing(&with(server, "Approved")) {
        SignDecision::Fail(why) => assert!(why.contains("usages must be"), "{why}"),
        other => panic!("{other:?}"),
    }
    let user = csr_pem("jane", &["dev"], &[]);
    let client = csr(
        &user,
        APISERVER_CLIENT_SIGNER,
        &["client auth"],
        "admin",
        &[],
    );
    assert!(matches!(
        plan_signing(&with(client, "Approved")),
        SignDecision::Sign(_)
    ));
}

#[test]
fn a_new_condition_keeps_the_old_ones_and_pins_the_version() {
    let c = with(node_csr("admin", &[]), "Approved");
    let patch = with_condition(&c, condition("Failed", "SignerValidationFailure", "no"));
    assert_eq!(patch["metadata"]["resourceVersion"], "5");
    let types: Vec<&str> = patch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, vec!["Approved", "Failed"]);
    assert_eq!(patch["status"]["conditions"][1]["status"], "True");
}

#[test]
fn an_approved_serving_request_is_signed_for_its_names_with_server_auth() {
    let pem = csr_pem("system:node:n1", &["system:nodes"], &["n1", "10.0.0.5"]);
    let usages = ["digital signature", "key encipherment", "server auth"];
    let c = csr(&pem, KUBELET_SERVING_SIGNER, &usages, "system:node:n1", &[]);
    let SignDecision::Sign(req) = plan_signing(&with(c, "Approved")) else {
        panic!("an approved serving request is signed");
    };
    let (ca, key) = sign::tests::ca(2036);
    let signer = Signer::from_pem(&ca, &key, Duration::from_secs(180)).unwrap();
    let usages: Vec<String> = usages.iter().map(|u| u.to_string()).collect();
    let now = time::OffsetDateTime::now_utc();
    let cert = signer.sign(&req, &usages, None, now).unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
    let (_, x509) = x509_parser::parse_x509_certificate(&block.contents).unwrap();
    let eku = x509.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    let sans = x509.subject_alternative_name().unwrap().unwrap().value;
    let text = format!("{:?}", sans.general_names);
    assert!(
        text.contains("n1") && text.contains("[10, 0, 0, 5]"),
        "{text}"
    );
    let no_sans = csr_pem("system:node:n1", &["system:nodes"], &[]);
    let c = csr(
        &no_sans,
        KUBELET_SERVING_SIGNER,
        &["digital signature", "server auth"],
        "x",
        &[],
    );
    assert!(matches!(
        plan_signing(&with(c, "Approved")),
        SignDecision::Fail(_)
    ));
}
