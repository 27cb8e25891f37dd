//! A CSR's spec.request (PEM PKCS#10, written by any client that may create CSRs) read into
//! what the approver and the signer check: subject names, SANs, and the DER to sign from.

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::ParsedExtension;
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
    let has_sans = csr.requested_extensions().is_some_and(|mut exts| {
        exts.any(|e| matches!(e, ParsedExtension::SubjectAlternativeName(san) if !san.general_names.is_empty()))
    });
    Ok(Request {
        common_names,
        organizations,
        has_sans,
        simple_subject,
        der: block.contents.clone(),
    })
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
