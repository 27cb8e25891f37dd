//! Reissuing a certificate from its CA with the same key, subject, names and usages, valid for
//! a year from now (never past the CA). Pure.

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType, SerialNumber,
};
use rustls::pki_types::CertificateDer;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// A year, as kubeadm renews.
const VALIDITY_SECS: i64 = 365 * 86_400;

fn der(pem: &str) -> Result<Vec<u8>, String> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .find(|b| b.label == "CERTIFICATE")
        .map(|b| b.contents)
        .ok_or_else(|| "no certificate".to_string())
}

/// Whether the certificate is a CA (basicConstraints CA:TRUE).
pub fn is_ca(pem: &str) -> Result<bool, String> {
    let der = der(pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| e.to_string())?;
    Ok(cert.is_ca())
}

/// The certificate issued again by the CA (`ca_crt`, `ca_key`), or None when that CA did not
/// issue it (its issuer is another name).
pub fn reissue(
    cert_pem: &str,
    key_pem: &str,
    ca_crt: &str,
    ca_key: &str,
    now: i64,
) -> Result<Option<String>, String> {
    let cert_der = der(cert_pem)?;
    let ca_der = der(ca_crt)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).map_err(|e| e.to_string())?;
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).map_err(|e| e.to_string())?;
    if cert.issuer().as_raw() != ca.subject().as_raw() {
        return Ok(None);
    }
    let ca_not_after = ca.validity().not_after.timestamp();
    let mut params = params_of(&cert)?;
    let at = |unix: i64| {
        time::OffsetDateTime::from_unix_timestamp(unix).map_err(|e| format!("time {unix}: {e}"))
    };
    params.not_before = at(now - 300)?;
    params.not_after = at((now + VALIDITY_SECS).min(ca_not_after))?;
    let mut serial: [u8; 16] = rand::random();
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::from_pem(key_pem).map_err(|e| format!("the certificate's key: {e}"))?;
    if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
        return Err("the key beside it is not the certificate's".into());
    }
    let ca_key = KeyPair::from_pem(ca_key).map_err(|e| format!("the CA key: {e}"))?;
    let issuer = Issuer::from_ca_cert_der(&CertificateDer::from(ca_der), ca_key)
        .map_err(|e| format!("the CA: {e}"))?;
    let new = params
        .signed_by(&key, &issuer)
        .map_err(|e| format!("signing: {e}"))?;
    Ok(Some(new.pem()))
}

/// A leaf certificate's subject (attributes in order; a second O under its OID, as rcgen
/// keeps one value per type), DNS and IP names, key usages and extended key usages.
fn params_of(cert: &X509Certificate<'_>) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    let mut seen_o = false;
    for attr in cert.subject().iter_attributes() {
        let value = attr
            .as_str()
            .map_err(|_| "a subject attribute is not a string".to_string())?;
        let oid: Vec<u64> = attr
            .attr_type()
            .iter()
            .map(|arcs| arcs.collect())
            .unwrap_or_default();
        let dn_type = match oid.as_slice() {
            [2, 5, 4, 3] => DnType::CommonName,
            [2, 5, 4, 10] if !seen_o => {
                seen_o = true;
                DnType::OrganizationName
            }
            [2, 5, 4, 11] => DnType::OrganizationalUnitName,
            _ => DnType::CustomDnType(oid),
        };
        params.distinguished_name.push(dn_type, value);
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => params.subject_alt_names.push(SanType::DnsName(
                    d.to_string().try_into().map_err(|e| format!("{e}"))?,
                )),
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).map(std::net::IpAddr::from).ok(),
                        16 => <[u8; 16]>::try_from(*bytes)
                            .map(std::net::IpAddr::from)
                            .ok(),
                        _ => None,
                    };
                    let ip = ip.ok_or_else(|| "a malformed IP address name".to_string())?;
                    params.subject_alt_names.push(SanType::IpAddress(ip));
                }
                other => return Err(format!("cannot copy the name {other:?}")),
            }
        }
    }
    if let Ok(Some(ku)) = cert.key_usage() {
        let ku = ku.value;
        for (on, usage) in [
            (ku.digital_signature(), KeyUsagePurpose::DigitalSignature),
            (ku.key_encipherment(), KeyUsagePurpose::KeyEncipherment),
            (ku.key_agreement(), KeyUsagePurpose::KeyAgreement),
        ] {
            if on {
                params.key_usages.push(usage);
            }
        }
    }
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        if eku.value.server_auth {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if eku.value.client_auth {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
    }
    params.is_ca = IsCa::ExplicitNoCa;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::BasicConstraints;

    fn ca(cn: &str) -> (String, String, Issuer<'static, KeyPair>) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.not_after = rcgen::date_time_ymd(2036, 1, 1);
        let cert = p.self_signed(&key).unwrap();
        let (crt, key_pem) = (cert.pem(), key.serialize_pem());
        let issuer = Issuer::from_ca_cert_pem(&crt, KeyPair::from_pem(&key_pem).unwrap()).unwrap();
        (crt, key_pem, issuer)
    }

    #[test]
    fn the_reissued_certificate_keeps_key_subject_names_and_usages() {
        let (ca_crt, ca_key, issuer) = ca("keelson-ca");
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "keelson-apiserver");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.not_after = rcgen::date_time_ymd(2026, 2, 1);
        let old = p.signed_by(&key, &issuer).unwrap().pem();
        assert!(!is_ca(&old).unwrap() && is_ca(&ca_crt).unwrap());
        // 2026-01-01
        let now = 1_767_225_600;
        let new = reissue(&old, &key.serialize_pem(), &ca_crt, &ca_key, now)
            .unwrap()
            .expect("issued by that CA");
        let d = der(&new).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
        assert_eq!(c.subject().to_string(), "CN=keelson-apiserver");
        assert_eq!(c.issuer().to_string(), "CN=keelson-ca");
        assert_eq!(c.validity().not_after.timestamp(), now + VALIDITY_SECS);
        assert_eq!(
            c.public_key().subject_public_key.data.as_ref(),
            key.public_key_raw()
        );
        let eku = c.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        let again = params_of(&c).unwrap();
        assert!(again
            .subject_alt_names
            .contains(&SanType::DnsName("localhost".try_into().unwrap())));
        assert!(again
            .subject_alt_names
            .contains(&SanType::IpAddress("127.0.0.1".parse().unwrap())));
        // Renewing again works the same (idempotent up to serial and dates).
        assert!(reissue(&new, &key.serialize_pem(), &ca_crt, &ca_key, now)
            .unwrap()
            .is_some());
    }

    #[test]
    fn another_cas_certificate_or_a_foreign_key_is_not_reissued() {
        let (ca_crt, ca_key, _) = ca("keelson-ca");
        let (_, _, other) = ca("etcd-ca");
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, "etcd-client");
        let foreign = p.signed_by(&key, &other).unwrap().pem();
        let got = reissue(
            &foreign,
            &key.serialize_pem(),
            &ca_crt,
            &ca_key,
            1_767_225_600,
        );
        assert_eq!(got, Ok(None));
        let (_, _, issuer) = ca("keelson-ca");
        let own = p.signed_by(&key, &issuer).unwrap().pem();
        let wrong_key = KeyPair::generate().unwrap().serialize_pem();
        let err = reissue(&own, &wrong_key, &ca_crt, &ca_key, 1_767_225_600).unwrap_err();
        assert!(err.contains("not the certificate's"), "{err}");
    }
}

#[cfg(test)]
mod subject_tests {
    use super::*;

    #[test]
    fn a_component_with_two_groups_keeps_both() {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "system:node:n1");
        p.distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        p.distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 10]), "extra");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let pem = p.self_signed(&key).unwrap().pem();
        let d = der(&pem).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
        let copied = params_of(&c).unwrap().self_signed(&key).unwrap();
        let (_, c2) = x509_parser::parse_x509_certificate(copied.der()).unwrap();
        assert_eq!(c2.subject().as_raw(), c.subject().as_raw());
    }
}
