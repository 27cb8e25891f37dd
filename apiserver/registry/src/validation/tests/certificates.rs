use super::{assert_has, causes, fields};
use crate::apply_defaults;
use crate::validation::validate;
use keelson_apimachinery::base64;
use serde_json::{json, Value};

fn request_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "system:node:n1");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(request: &str) -> Value {
    json!({"metadata": {"name": "node-csr-1"}, "spec": {
        "request": base64::encode(request.as_bytes()),
        "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
        "usages": ["digital signature", "client auth"]}})
}

#[test]
fn a_signed_request_is_valid() {
    assert_eq!(
        causes("CertificateSigningRequest", csr(&request_pem())),
        vec![]
    );
}

#[test]
fn request_must_be_a_certificate_request_block() {
    let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    for bad in ["hello", cert] {
        let c = causes("CertificateSigningRequest", csr(bad));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].field, "spec.request");
        assert!(c[0]
            .message
            .ends_with("PEM block type must be CERTIFICATE REQUEST"));
    }
    // A request whose signature does not match its key.
    let pem = request_pem();
    let der = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .unwrap()
        .1
        .contents;
    let mut broken = der.clone();
    let last = broken.len() - 1;
    broken[last] ^= 1;
    let text = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        base64::encode(&broken)
    );
    let c = causes("CertificateSigningRequest", csr(&text));
    assert_eq!(c.len(), 1, "{c:?}");
}

#[test]
fn usages_signer_and_duration() {
    let mut obj = csr(&request_pem());
    obj["spec"]["usages"] = json!(["client auth", "flying", "client auth"]);
    obj["spec"]["signerName"] = json!("no-slash");
    obj["spec"]["expirationSeconds"] = json!(60);
    assert_has(
        &fields("CertificateSigningRequest", obj),
        &[
            ("FieldValueNotSupported", "spec.usages[1]"),
            ("FieldValueDuplicate", "spec.usages[2]"),
            ("FieldValueInvalid", "spec.signerName"),
            ("FieldValueInvalid", "spec.expirationSeconds"),
        ],
    );
    let mut none = csr(&request_pem());
    none["spec"]["usages"] = json!([]);
    assert_has(
        &fields("CertificateSigningRequest", none),
        &[("FieldValueRequired", "spec.usages")],
    );
}

#[test]
fn approved_and_denied_are_exclusive_and_kept() {
    let mut obj = csr(&request_pem());
    obj["status"] = json!({"conditions": [{"type": "Approved"}, {"type": "Denied"}]});
    apply_defaults("CertificateSigningRequest", &mut obj);
    assert_eq!(obj["status"]["conditions"][0]["status"], "True");
    let c = validate("CertificateSigningRequest", &obj, None);
    assert!(
        c.iter().any(|c| c.field == "status.conditions"
            && c.message
                .ends_with("Approved and Denied conditions are mutually exclusive")),
        "{c:?}"
    );
    let mut old = csr(&request_pem());
    old["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let mut new = old.clone();
    new["status"] = json!({"conditions": []});
    let c = validate("CertificateSigningRequest", &new, Some(&old));
    assert!(
        c.iter().any(|c| c
            .message
            .contains("may not remove a condition of type \"Approved\"")),
        "{c:?}"
    );
}

#[test]
fn issued_certificate_is_pem_and_set_once() {
    let mut obj = csr(&request_pem());
    obj["status"] = json!({"certificate": base64::encode(b"not pem")});
    let c = validate("CertificateSigningRequest", &obj, None);
    assert!(c.iter().any(|c| c.field == "status.certificate"), "{c:?}");
}
