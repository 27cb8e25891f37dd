//! The X.509 checks of certificates.k8s.io: a CSR's `spec.request` and `status.certificate`
//! are base64 (JSON's form of bytes) of PEM text.

use keelson_apimachinery::base64;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;

/// The PEM blocks of a base64 `bytes` field.
fn pem_blocks(b64: &str) -> Result<Vec<Pem>, String> {
    let bytes = base64::decode(b64).ok_or("must be base64-encoded PEM data")?;
    Pem::iter_from_buffer(&bytes)
        .collect::<Result<Vec<Pem>, _>>()
        .map_err(|e| format!("invalid PEM data: {e}"))
}

/// A PKCS#10 request as upstream's ParseCSR + CheckSignature accept it: the first PEM block
/// is a CERTIFICATE REQUEST that parses and is signed by its own key.
pub fn parse_request(b64: &str) -> Result<(), String> {
    let wrong = || "PEM block type must be CERTIFICATE REQUEST".to_string();
    let blocks = pem_blocks(b64).map_err(|_| wrong())?;
    let block = blocks.first().filter(|b| b.label == "CERTIFICATE REQUEST");
    let block = block.ok_or_else(wrong)?;
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|e| format!("x509: certificate request signature check failed: {e}"))
}

/// status.certificate: one or more CERTIFICATE blocks, each a parsable certificate.
pub fn check_certificates(b64: &str) -> Result<(), String> {
    let blocks = pem_blocks(b64)?;
    if blocks.is_empty() {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    for (i, b) in blocks.iter().enumerate() {
        if b.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                b.label
            ));
        }
        x509_parser::parse_x509_certificate(&b.contents)
            .map_err(|e| format!("failure parsing certificate {i}: {e}"))?;
    }
    Ok(())
}
