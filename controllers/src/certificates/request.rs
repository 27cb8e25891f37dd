//! A CSR's spec.request (PEM PKCS#10, written by any client that may create CSRs) read into
//! what the approver and the signer check: subject names, SANs, and the DER to sign from.

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("spec.request is not PEM data: {0}")]
    Pem(String),
    #[error("spec.request: PEM block type must be CERTIFICATE REQUEST, not {0:?}")]
    Label(String),
    #[error("spec.request: malformed certificate request: {0}")]
    Der(String),
    #[error("spec.request: the certificate request is not signed by its own key: {0}")]
    Signature(String),
    #[error("spec.request: subject attribute {0} is not a string")]
    Attribute(String),
}

/// What a verified certificate request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub common_names: Vec<String>,
    pub organizations: Vec<String>,
    /// Any DNS, email, IP or URI subject alternative name was asked for.
    pub has_sans: bool,
    /// The DNS and IP subject alternative names asked for.
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// An email, URI or other kind of subject alternative name was asked for.
    pub other_sans: bool,
    /// Every relative distinguished name holds one attribute, and no attribute type repeats
    /// (the subjects the signer can copy; see sign.rs).
    pub simple_subject: bool,
    pub der: Vec<u8>,
}

/// Parses and verifies the request's own signature, as upstream's ParseCSR + CheckSignature.
pub fn parse(pem: &[u8]) -> Result<Request, RequestError> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|e| RequestError::Pem(e.to_string()))?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(RequestError::Label(block.label));
    }
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| RequestError::Der(e.to_string()))?;
    csr.verify_signature()
        .map_err(|e| RequestError::Signature(e.to_string()))?;
    let subject = &csr.certification_request_info.subject;
    check_rdns(subject)?;
    let strings = |attrs: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue>| {
        attrs
            .map(|a| {
                a.as_str()
                    .map(String::from)
                    .map_err(|_| RequestError::Attribute(a.attr_type().to_id_string()))
            })
            .collect::<Result<Vec<String>, RequestError>>()
    };
    let common_names = strings(&mut subject.iter_common_name())?;
    let organizations = strings(&mut subject.iter_organization())?;
    let mut types = Vec::new();
    let mut simple_subject = true;
    for rdn in subject.iter() {
        let attrs: Vec<_> = rdn.iter().collect();
        simple_subject &= attrs.len() == 1;
        for a in attrs {
            let t = a.attr_type().to_id_string();
            simple_subject &= !types.contains(&t);
            types.push(t);
        }
    }
    let (mut dns_names, mut ip_addresses, mut other_sans) = (Vec::new(), Vec::new(), false);
    for ext in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => dns_names.push(d.to_string()),
                GeneralName::IPAddress(bytes) => match ip_from(bytes) {
                    Some(ip) => ip_addresses.push(ip),
                    None => other_sans = true,
                },
                _ => other_sans = true,
            }
        }
    }
    let has_sans = other_sans || !dns_names.is_empty() || !ip_addresses.is_empty();
    Ok(Request {
        common_names,
        organizations,
        has_sans,
        dns_names,
        ip_addresses,
        other_sans,
        simple_subject,
        der: block.contents.clone(),
    })
}

/// An IP address SAN's octets (4 or 16).
fn ip_from(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        _ => None,
    }
}

/// x509-parser stops reading a subject at an RDN it cannot parse (an empty SET) and shows only
/// what came before, so the names it reports would not be the subject: every SET of the raw
/// Name must be non-empty and read.
fn check_rdns(subject: &x509_parser::x509::X509Name) -> Result<(), RequestError> {
    use x509_parser::asn1_rs::{Any, FromDer as _, Tag};
    let unreadable = || RequestError::Der("the subject has an empty or unreadable RDN".into());
    let (_, name) = Any::from_der(subject.as_raw()).map_err(|_| unreadable())?;
    let mut rest = name.data;
    let mut sets = 0;
    while !rest.is_empty() {
        let (next, set) = Any::from_der(rest).map_err(|_| unreadable())?;
        if set.tag() != Tag::Set || set.data.is_empty() {
            return Err(unreadable());
        }
        sets += 1;
        rest = next;
    }
    if sets != subject.iter().count() {
        return Err(unreadable());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    /// A PEM CSR for `cn` and `orgs`, signed by a fresh P-256 key (as the agent makes them).
    pub fn csr_pem(cn: &str, orgs: &[&str], sans: &[&str]) -> String {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        for o in orgs {
            // rcgen keeps one value per type: a second O is written under its OID as a custom type.
            if dn.get(&DnType::OrganizationName).is_none() {
                dn.push(DnType::OrganizationName, *o);
            } else {
                dn.push(DnType::CustomDnType(vec![2, 5, 4, 10]), *o);
            }
        }
        params.distinguished_name = dn;
        let key = KeyPair::generate().unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn a_node_csr_reads_as_its_subject() {
        let pem = csr_pem("system:node:n1", &["system:nodes"], &[]);
        let r = parse(pem.as_bytes()).unwrap();
        assert_eq!(r.common_names, vec!["system:node:n1"]);
        assert_eq!(r.organizations, vec!["system:nodes"]);
        assert!(!r.has_sans);
        assert!(r.simple_subject);
    }

    #[test]
    fn repeated_organizations_and_sans_are_seen() {
        let pem = csr_pem(
            "system:node:n1",
            &["system:nodes", "system:masters"],
            &["n1.example"],
        );
        let r = parse(pem.as_bytes()).unwrap();
        assert_eq!(r.organizations, vec!["system:nodes", "system:masters"]);
        assert!(r.has_sans);
        assert!(!r.simple_subject);
        assert_eq!(r.dns_names, vec!["n1.example"]);
        assert!(r.ip_addresses.is_empty() && !r.other_sans);
    }

    #[test]
    fn dns_and_ip_sans_are_read_apart() {
        let pem = csr_pem(
            "system:node:n1",
            &["system:nodes"],
            &["n1", "10.0.0.5", "fd00::5"],
        );
        let r = parse(pem.as_bytes()).unwrap();
        assert_eq!(r.dns_names, vec!["n1"]);
        let ips: Vec<String> = r.ip_addresses.iter().map(|i| i.to_string()).collect();
        assert_eq!(ips, vec!["10.0.0.5", "fd00::5"]);
        assert!(r.has_sans && !r.other_sans);
    }

    #[test]
    fn bad_requests_are_errors_that_say_what_is_wrong() {
        assert!(matches!(parse(b"hello"), Err(RequestError::Pem(_))));
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(
            parse(cert.as_bytes()),
            Err(RequestError::Label("CERTIFICATE".into()))
        );
        let junk = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert!(matches!(parse(junk.as_bytes()), Err(RequestError::Der(_))));
    }

    /// DER type-length-value (lengths below 64 KiB).
    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match content.len() {
            n if n < 0x80 => out.push(n as u8),
            n if n < 0x100 => out.extend([0x81, n as u8]),
            n => out.extend([0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(content);
        out
    }

    /// A correctly signed request whose subject is `rdns` (each an encoded SET), built by hand:
    /// subjects rcgen cannot write, such as an empty RDN or one with two attributes.
    fn signed_request(rdns: &[Vec<u8>]) -> String {
        use rcgen::{PublicKeyData, SigningKey};
        let key = KeyPair::generate().unwrap();
        let name = tlv(0x30, &rdns.concat());
        let info = tlv(
            0x30,
            &[
                tlv(0x02, &[0]),
                name,
                key.subject_public_key_info(),
                tlv(0xa0, &[]),
            ]
            .concat(),
        );
        let ecdsa_sha256 = [
            0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
        ];
        let sig = tlv(0x03, &[&[0u8][..], &key.sign(&info).unwrap()].concat());
        let der = tlv(0x30, &[info, ecdsa_sha256.to_vec(), sig].concat());
        let b64 = keelson_apimachinery::base64::encode(&der);
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n")
    }

    fn attr(oid_last: u8, value: &str) -> Vec<u8> {
        tlv(
            0x30,
            &[
                tlv(0x06, &[0x55, 0x04, oid_last]),
                tlv(0x0c, value.as_bytes()),
            ]
            .concat(),
        )
    }

    #[test]
    fn subjects_rcgen_cannot_copy_are_marked_and_refused_by_the_signer() {
        let (cn, o) = (attr(3, "system:node:n1"), attr(10, "system:nodes"));
        let plain = parse(signed_request(&[tlv(0x31, &cn), tlv(0x31, &o)]).as_bytes()).unwrap();
        assert!(plain.simple_subject, "the hand-built request is sound");
        assert_eq!(plain.organizations, vec!["system:nodes"]);
        let two_in_one = signed_request(&[tlv(0x31, &[cn.clone(), o.clone()].concat())]);
        // x509-parser reads a subject with an empty RDN as empty (and rcgen would panic on one
        // it did see): refused outright.
        let empty = signed_request(&[tlv(0x31, &[]), tlv(0x31, &cn), tlv(0x31, &o)]);
        assert!(
            matches!(parse(empty.as_bytes()), Err(RequestError::Der(e)) if e.contains("empty or unreadable RDN"))
        );
        let req = parse(two_in_one.as_bytes()).unwrap();
        assert!(!req.simple_subject, "{req:?}");
        assert_eq!(req.common_names, vec!["system:node:n1"]);
        let (ca, key) = crate::certificates::sign::tests::ca(2036);
        let hour = std::time::Duration::from_secs(3600);
        let signer = crate::certificates::Signer::from_pem(&ca, &key, hour).unwrap();
        let usages = vec!["client auth".to_string()];
        let now = time::OffsetDateTime::now_utc();
        assert!(matches!(
            signer.sign(&req, &usages, None, now),
            Err(crate::certificates::SignError::Subject)
        ));
    }

    #[test]
    fn a_request_whose_signature_does_not_match_is_refused() {
        let pem = csr_pem("system:node:n1", &["system:nodes"], &[]);
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let mut der = block.contents.clone();
        // The last byte is inside the signature.
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let b64 = keelson_apimachinery::base64::encode(&der);
        let tampered = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n"
        );
        assert!(matches!(
            parse(tampered.as_bytes()),
            Err(RequestError::Signature(_)) | Err(RequestError::Der(_))
        ));
    }
}
