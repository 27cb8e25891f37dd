//! The keys service-account tokens are signed and verified with: the signing key (PKCS#8
//! ECDSA P-256 or RSA, or PKCS#1 RSA; an ECDSA key generated in the data directory when none is
//! given) and the public keys of --service-account-key-file.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, UnparsedPublicKey};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("generating the service-account signing key: {0}")]
    Generate(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Alg {
    Es256,
    Rs256,
}

impl Alg {
    pub(super) fn name(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::Rs256 => "RS256",
        }
    }
}

pub(super) enum Signing {
    Ecdsa(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

/// A key tokens are verified with: the signing key's public half, or one of
/// --service-account-key-file.
#[derive(Debug, Clone)]
pub(super) struct PublicKey {
    pub(super) alg: Alg,
    pub(super) kid: String,
    /// An uncompressed P-256 point, or a DER RSAPublicKey (what ring verifies with).
    bytes: Vec<u8>,
}

impl PublicKey {
    pub(super) fn new(alg: Alg, bytes: Vec<u8>) -> PublicKey {
        // The key id is a hash of the key, so tokens name the key that signed them.
        let kid = B64.encode(ring::digest::digest(&ring::digest::SHA256, &bytes));
        PublicKey { alg, kid, bytes }
    }

    pub(super) fn verify(&self, message: &[u8], sig: &[u8]) -> bool {
        let alg: &dyn signature::VerificationAlgorithm = match self.alg {
            Alg::Es256 => &signature::ECDSA_P256_SHA256_FIXED,
            Alg::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
        };
        UnparsedPublicKey::new(alg, &self.bytes)
            .verify(message, sig)
            .is_ok()
    }
}

pub(super) fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.into(),
        source,
    })
}

/// Makes an ECDSA P-256 key (PKCS#8 PEM, 0600) at `path` unless one is there.
pub(super) fn ensure_generated(path: &Path) -> Result<PathBuf, KeyError> {
    if !path.exists() {
        let key = rcgen::KeyPair::generate().map_err(|e| KeyError::Generate(e.to_string()))?;
        crate::certs::write_private(path, &key.serialize_pem())
            .map_err(|e| KeyError::Generate(e.to_string()))?;
    }
    Ok(path.to_path_buf())
}

fn pem_items(pem: &str, path: &Path) -> Result<Vec<rustls_pemfile::Item>, KeyError> {
    rustls_pemfile::read_all(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| KeyError::Invalid {
            path: path.into(),
            message: format!("not PEM: {e}"),
        })
}

/// The first private key in `pem`: PKCS#8 ECDSA P-256 or RSA, or PKCS#1 RSA.
pub(super) fn signing_key(pem: &str, path: &Path) -> Result<Signing, KeyError> {
    for item in pem_items(pem, path)? {
        if let Some(key) = private_key(&item, path) {
            return key;
        }
    }
    Err(KeyError::Invalid {
        path: path.into(),
        message: "no private key".into(),
    })
}

/// The key of a private-key PEM item; None for other items.
fn private_key(item: &rustls_pemfile::Item, path: &Path) -> Option<Result<Signing, KeyError>> {
    use rustls_pemfile::Item;
    let invalid = |message: &str| KeyError::Invalid {
        path: path.into(),
        message: message.into(),
    };
    Some(match item {
        Item::Pkcs8Key(der) => {
            let der = der.secret_pkcs8_der();
            let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
            match EcdsaKeyPair::from_pkcs8(alg, der, &SystemRandom::new()) {
                Ok(k) => Ok(Signing::Ecdsa(k)),
                Err(_) => RsaKeyPair::from_pkcs8(der)
                    .map(Signing::Rsa)
                    .map_err(|_| invalid("a PKCS#8 key that is neither ECDSA P-256 nor RSA")),
            }
        }
        Item::Pkcs1Key(der) => RsaKeyPair::from_der(der.secret_pkcs1_der())
            .map(Signing::Rsa)
            .map_err(|_| invalid("an unusable RSA key")),
        Item::Sec1Key(_) => Err(invalid(
            "an EC PRIVATE KEY: convert it with `openssl pkcs8 -topk8 -nocrypt`",
        )),
        _ => return None,
    })
}

pub(super) fn public_of(key: &Signing) -> PublicKey {
    match key {
        Signing::Ecdsa(k) => PublicKey::new(Alg::Es256, k.public_key().as_ref().to_vec()),
        Signing::Rsa(k) => PublicKey::new(Alg::Rs256, k.public_key().as_ref().to_vec()),
    }
}

/// Every key in a --service-account-key-file: public keys, or the public half of private keys.
pub(super) fn public_keys(pem: &str, path: &Path) -> Result<Vec<PublicKey>, KeyError> {
    let mut keys = Vec::new();
    for item in pem_items(pem, path)? {
        if let rustls_pemfile::Item::SubjectPublicKeyInfo(spki) = &item {
            keys.push(spki_key(spki.as_ref(), path)?);
        } else if let Some(key) = private_key(&item, path) {
            keys.push(public_of(&key?));
        }
    }
    if keys.is_empty() {
        return Err(KeyError::Invalid {
            path: path.into(),
            message: "no public or private key".into(),
        });
    }
    Ok(keys)
}

/// An RSA or ECDSA P-256 key from its DER SubjectPublicKeyInfo.
fn spki_key(der: &[u8], path: &Path) -> Result<PublicKey, KeyError> {
    use x509_parser::prelude::FromDer;
    let invalid = |message: String| KeyError::Invalid {
        path: path.into(),
        message,
    };
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(der)
        .map_err(|e| invalid(format!("bad public key: {e}")))?;
    let bits = spki.subject_public_key.data.to_vec();
    match spki.algorithm.algorithm.to_id_string().as_str() {
        "1.2.840.10045.2.1" => Ok(PublicKey::new(Alg::Es256, bits)),
        "1.2.840.113549.1.1.1" => Ok(PublicKey::new(Alg::Rs256, bits)),
        other => Err(invalid(format!(
            "public key algorithm {other}: want RSA or ECDSA P-256"
        ))),
    }
}
