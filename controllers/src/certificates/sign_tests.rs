use super::*;
use crate::certificates::request::{parse, tests::csr_pem};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyUsagePurpose,
};
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::{FromDer, X509Certificate};

const YEAR: Duration = Duration::from_secs(8760 * 3600);

/// A CA as the API server's certs.rs makes it: (cert PEM, key PEM).
pub(crate) fn ca(not_after_year: i32) -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "keelson-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(not_after_year, 1, 1);
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

fn der(pem: &str) -> Vec<u8> {
    x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .unwrap()
        .1
        .contents
}

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_790_000_000).unwrap() // 2026-09
}

fn usages(u: &[&str]) -> Vec<String> {
    u.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_node_certificate_chains_to_the_ca_with_the_requested_subject_and_client_auth() {
    let (ca_pem, key_pem) = ca(2036);
    let signer = Signer::from_pem(&ca_pem, &key_pem, YEAR).unwrap();
    let req = parse(csr_pem("system:node:n1", &["system:nodes"], &[]).as_bytes()).unwrap();
    let pem = signer
        .sign(
            &req,
            &usages(&["digital signature", "client auth"]),
            None,
            now(),
        )
        .unwrap();
    let (cert_der, ca_der) = (der(&pem), der(&ca_pem));
    let (_, cert) = X509Certificate::from_der(&cert_der).unwrap();
    let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
    cert.verify_signature(Some(ca.public_key()))
        .expect("signed by the CA");
    assert_eq!(cert.issuer(), ca.subject());
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    let o: Vec<_> = cert
        .subject()
        .iter_organization()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!((cn, o), (vec!["system:node:n1"], vec!["system:nodes"]));
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    let ku = cert.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && !ku.key_cert_sign());
    assert!(!cert.is_ca());
    let v = cert.validity();
    assert_eq!(
        v.not_before.timestamp(),
        now().unix_timestamp() - 300,
        "backdated 5 minutes"
    );
    assert_eq!(
        v.not_after.timestamp(),
        now().unix_timestamp() + 8760 * 3600
    );
    assert_eq!(cert.public_key().raw, req_spki(&req));
}

fn req_spki(req: &Request) -> Vec<u8> {
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&req.der).unwrap();
    csr.certification_request_info.subject_pki.raw.to_vec()
}

#[test]
fn validity_is_the_shortest_of_expiration_seconds_the_flag_and_the_ca() {
    let (ca_pem, key_pem) = ca(2036);
    let signer = Signer::from_pem(&ca_pem, &key_pem, YEAR).unwrap();
    let req = parse(csr_pem("jane", &["dev"], &[]).as_bytes()).unwrap();
    let client = usages(&["client auth"]);
    let not_after = |pem: String| {
        X509Certificate::from_der(&der(&pem))
            .unwrap()
            .1
            .validity()
            .not_after
            .timestamp()
    };
    let hour = signer.sign(&req, &client, Some(3600), now()).unwrap();
    assert_eq!(not_after(hour), now().unix_timestamp() + 3600);
    let long = signer.sign(&req, &client, Some(i32::MAX), now()).unwrap();
    assert_eq!(not_after(long), now().unix_timestamp() + 8760 * 3600);
    let (old_ca, old_key) = ca(2027);
    let short_ca = Signer::from_pem(&old_ca, &old_key, YEAR).unwrap();
    let capped = short_ca.sign(&req, &client, None, now()).unwrap();
    assert_eq!(
        not_after(capped),
        rcgen::date_time_ymd(2027, 1, 1).unix_timestamp()
    );
    let later = rcgen::date_time_ymd(2027, 1, 1);
    let expired = short_ca.sign(&req, &client, None, later).unwrap_err();
    assert!(matches!(expired, SignError::CaExpired(_)));
    let message = expired.to_string();
    assert!(
        message.starts_with("the cluster CA (--cluster-signing-cert-file) expired at 2027-01-01"),
        "{message}"
    );
}

#[test]
fn the_requests_own_extensions_are_not_copied() {
    let (ca_pem, key_pem) = ca(2036);
    let signer = Signer::from_pem(&ca_pem, &key_pem, YEAR).unwrap();
    // A request asking to be a CA with server auth.
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "sneaky");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let req = parse(pem.as_bytes()).unwrap();
    let out = signer
        .sign(&req, &usages(&["client auth"]), None, now())
        .unwrap();
    let cert_der = der(&out);
    let (_, cert) = X509Certificate::from_der(&cert_der).unwrap();
    assert!(!cert.is_ca());
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    let constraints = cert
        .extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::BasicConstraints(bc) => Some(bc.ca),
            _ => None,
        });
    assert_eq!(constraints, Some(false));
}

#[test]
fn a_subject_with_two_organizations_is_refused_rather_than_cut() {
    let (ca_pem, key_pem) = ca(2036);
    let signer = Signer::from_pem(&ca_pem, &key_pem, YEAR).unwrap();
    let req = parse(csr_pem("jane", &["dev", "ops"], &[]).as_bytes()).unwrap();
    assert!(matches!(
        signer.sign(&req, &usages(&["client auth"]), None, now()),
        Err(SignError::Subject)
    ));
}

#[test]
fn a_key_that_is_not_the_cas_is_refused_at_start() {
    let (ca_pem, _) = ca(2036);
    let (_, other_key) = ca(2036);
    assert!(matches!(
        Signer::from_pem(&ca_pem, &other_key, YEAR),
        Err(SignError::KeyMismatch)
    ));
    assert!(matches!(
        Signer::from_pem("nope", &other_key, YEAR),
        Err(SignError::Cert(_))
    ));
    assert!(matches!(
        Signer::from_pem(&ca_pem, "nope", YEAR),
        Err(SignError::Key(_))
    ));
    let missing = Signer::from_files(Path::new("/nonexistent/ca.crt"), Path::new("/x"), YEAR);
    assert!(matches!(missing, Err(SignError::Io { .. })));
}
