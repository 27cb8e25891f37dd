//! csrsigning's certificate, as upstream's local signer: subject, SANs and public key from the
//! request, key usages from spec.usages (never the request's own extensions), not a CA, valid
//! from five minutes ago (clock skew) for the shorter of spec.expirationSeconds and
//! `--cluster-signing-duration`, never past the CA's own expiry; signed by the cluster CA.

use super::request::Request;
use super::usages;
use rcgen::{CertificateSigningRequestParams, IsCa, Issuer, KeyPair, SerialNumber};
use std::path::{Path, PathBuf};
use std::time::Duration;
use time::OffsetDateTime;

/// Upstream's backdate for clock skew between the signer and the clients.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--cluster-signing-key-file: not a private key this signer can use: {0}")]
    Key(rcgen::Error),
    #[error("--cluster-signing-cert-file: not a PEM CA certificate: {0}")]
    Cert(String),
    #[error("--cluster-signing-key-file does not hold the key of --cluster-signing-cert-file")]
    KeyMismatch,
    /// rcgen keeps one value per attribute type, so it cannot copy such a subject faithfully;
    /// refusing beats issuing a certificate for fewer groups than asked.
    #[error("the request's subject repeats an attribute (such as two O values) or groups several in one RDN; this signer cannot issue such a subject")]
    Subject,
    #[error("cannot issue the certificate: {0}")]
    Issue(rcgen::Error),
    #[error("the cluster CA (--cluster-signing-cert-file) expired at {0}; give the controller manager a valid one")]
    CaExpired(OffsetDateTime),
}

/// The cluster CA, ready to sign.
pub struct Signer {
    issuer: Issuer<'static, KeyPair>,
    ca_not_after: OffsetDateTime,
    duration: Duration,
}

fn read(path: &Path) -> Result<String, SignError> {
    std::fs::read_to_string(path).map_err(|source| SignError::Io {
        path: path.into(),
        source,
    })
}

impl Signer {
    /// `--cluster-signing-cert-file`, `--cluster-signing-key-file`, `--cluster-signing-duration`.
    pub fn from_files(cert: &Path, key: &Path, duration: Duration) -> Result<Signer, SignError> {
        Signer::from_pem(&read(cert)?, &read(key)?, duration)
    }

    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        duration: Duration,
    ) -> Result<Signer, SignError> {
        let key = KeyPair::from_pem(key_pem).map_err(SignError::Key)?;
        let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|e| SignError::Cert(e.to_string()))?;
        let (_, ca) = x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| SignError::Cert(e.to_string()))?;
        if ca.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(SignError::KeyMismatch);
        }
        let ca_not_after = ca.validity().not_after.to_datetime();
        let issuer = Issuer::from_ca_cert_der(&block.contents.as_slice().into(), key)
            .map_err(|e| SignError::Cert(e.to_string()))?;
        Ok(Signer {
            issuer,
            ca_not_after,
            duration,
        })
    }

    /// A PEM certificate for an approved, checked request.
    pub fn sign(
        &self,
        req: &Request,
        spec_usages: &[String],
        expiration_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<String, SignError> {
        if now >= self.ca_not_after {
            return Err(SignError::CaExpired(self.ca_not_after));
        }
        if !req.simple_subject {
            return Err(SignError::Subject);
        }
        let parsed = CertificateSigningRequestParams::from_der(&req.der.as_slice().into())
            .map_err(SignError::Issue)?;
        let mut params = parsed.params;
        let ttl = expiration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.duration, |s| self.duration.min(Duration::from_secs(s)));
        params.not_before = now - BACKDATE;
        params.not_after = (now + ttl).min(self.ca_not_after);
        params.serial_number = Some(serial());
        params.is_ca = IsCa::ExplicitNoCa;
        (params.key_usages, params.extended_key_usages) = usages::to_x509(spec_usages);
        params.name_constraints = None;
        params.crl_distribution_points.clear();
        params.custom_extensions.clear();
        params.use_authority_key_identifier_extension = true;
        let csr = CertificateSigningRequestParams {
            params,
            public_key: parsed.public_key,
        };
        Ok(csr.signed_by(&self.issuer).map_err(SignError::Issue)?.pem())
    }
}

/// A random positive 128-bit serial, as upstream.
fn serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
#[path = "sign_tests.rs"]
pub(crate) mod tests;
