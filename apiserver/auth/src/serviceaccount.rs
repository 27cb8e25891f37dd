//! Service-account tokens: JWTs signed with the API server's key, as upstream's TokenRequest
//! issues them (ES256 for the ECDSA P-256 key made in the data directory at first start, RS256
//! for an RSA key such as kubeadm's sa.key), and their verification: signature, issuer,
//! audience, expiry, and that the service account (and the pod the token is bound to) still
//! exist with the same uid.

use super::User;
mod keys;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use keelson_apimachinery::well_known::SERVICE_ACCOUNTS_GROUP as ALL_GROUP;
use keys::{PublicKey, Signing};
use ring::rand::SystemRandom;
use ring::signature;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use keys::KeyError;

/// The signing key's file in the data directory when --service-account-signing-key-file is
/// not given (kubeadm's name).
pub const SIGNING_KEY_FILE: &str = "sa.key";

/// Prefix of a service account's user name.
const USER_PREFIX: &str = "system:serviceaccount:";

/// A reference in the token's private claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Ref {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Private {
    pub namespace: String,
    pub serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
}

/// A service-account token's claims, as upstream writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub iss: String,
    #[serde(default)]
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: Private,
    pub nbf: i64,
    pub sub: String,
}

impl Claims {
    /// The user the token stands for, in upstream's names.
    pub fn user(&self) -> User {
        let (ns, sa) = (&self.kubernetes.namespace, &self.kubernetes.serviceaccount);
        User {
            name: format!("{USER_PREFIX}{ns}:{}", sa.name),
            uid: sa.uid.clone(),
            groups: vec![ALL_GROUP.into(), format!("{ALL_GROUP}:{ns}")],
        }
    }

    /// What upstream puts in the user's extra: the bound pod and node, and the token's id.
    pub fn extra(&self) -> Value {
        let mut extra = serde_json::Map::new();
        let mut put = |k: &str, v: &str| {
            extra.insert(format!("authentication.kubernetes.io/{k}"), vec![v].into());
        };
        if let Some(p) = &self.kubernetes.pod {
            put("pod-name", &p.name);
            put("pod-uid", &p.uid);
        }
        if let Some(n) = &self.kubernetes.node {
            put("node-name", &n.name);
            put("node-uid", &n.uid);
        }
        if !self.jti.is_empty() {
            put("credential-id", &format!("JTI={}", self.jti));
        }
        Value::Object(extra)
    }
}

/// Looks up a stored object: (plural, namespace, name).
pub type Lookup<'a> = &'a dyn Fn(&str, &str, &str) -> Option<Value>;

/// The issuer: the signing key, every key accepted, and the flags' names.
pub struct TokenKeys {
    signing: Signing,
    signing_public: PublicKey,
    accepted: Vec<PublicKey>,
    rng: SystemRandom,
    /// --service-account-issuer
    pub issuer: String,
    /// --api-audiences: what a token must be for to authenticate to this server.
    pub api_audiences: Vec<String>,
    /// The shortest lifetime a TokenRequest may ask for: 600 s, lower only in tests.
    pub min_expiration_seconds: i64,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TokenKeys({}, kid {})",
            self.issuer, self.signing_public.kid
        )
    }
}

/// Where the keys come from.
pub struct KeyConfig<'a> {
    pub data_dir: &'a Path,
    pub signing_key_file: Option<&'a Path>,
    pub key_files: &'a [PathBuf],
    pub issuer: String,
    pub api_audiences: Vec<String>,
}

impl TokenKeys {
    /// Loads the signing key (made in the data directory when none is given and none is
    /// there yet) and the extra verification keys.
    pub fn load(c: KeyConfig) -> Result<TokenKeys, KeyError> {
        let path = match c.signing_key_file {
            Some(p) => p.to_path_buf(),
            None => keys::ensure_generated(&c.data_dir.join(SIGNING_KEY_FILE))?,
        };
        let pem = keys::read(&path)?;
        let signing = keys::signing_key(&pem, &path)?;
        let signing_public = keys::public_of(&signing);
        let mut accepted = vec![signing_public.clone()];
        for file in c.key_files {
            accepted.extend(keys::public_keys(&keys::read(file)?, file)?);
        }
        let api_audiences = match c.api_audiences.is_empty() {
            true => vec![c.issuer.clone()],
            false => c.api_audiences,
        };
        Ok(TokenKeys {
            signing,
            signing_public,
            accepted,
            rng: SystemRandom::new(),
            issuer: c.issuer,
            api_audiences,
            min_expiration_seconds: 600,
        })
    }

    /// A signed token carrying `claims`.
    pub fn sign(&self, claims: &Claims) -> Result<String, String> {
        let alg = self.signing_public.alg.name();
        let header = serde_json::json!({ "alg": alg, "kid": self.signing_public.kid });
        let payload = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
        let message = format!("{}.{}", B64.encode(header.to_string()), B64.encode(payload));
        let sig = match &self.signing {
            Signing::Ecdsa(k) => k
                .sign(&self.rng, message.as_bytes())
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| "ECDSA signing failed".to_string())?,
            Signing::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    message.as_bytes(),
                    &mut sig,
                )
                .map_err(|_| "RSA signing failed".to_string())?;
                sig
            }
        };
        Ok(format!("{message}.{}", B64.encode(sig)))
    }

    /// The claims of a token this server signed, if its signature, issuer, times and one of
    /// `audiences` check out (`now` in Unix seconds).
    pub fn verify(&self, token: &str, audiences: &[String], now: i64) -> Result<Claims, String> {
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".into());
        };
        let header: Value = decode_part(h)?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let kid = header.get("kid").and_then(Value::as_str);
        let sig = B64.decode(s).map_err(|_| "bad signature encoding")?;
        let message = format!("{h}.{p}");
        let signed = self
            .accepted
            .iter()
            .filter(|k| k.alg.name() == alg && kid.is_none_or(|kid| kid == k.kid))
            .any(|k| k.verify(message.as_bytes(), &sig));
        if !signed {
            return Err("invalid signature".into());
        }
        let claims: Claims = decode_part(p)?;
        if claims.iss != self.issuer {
            return Err(format!(
                "token issued by {:?}, not {:?}",
                claims.iss, self.issuer
            ));
        }
        if !claims.aud.iter().any(|a| audiences.contains(a)) {
            return Err("token audiences are not accepted".into());
        }
        if now >= claims.exp {
            return Err("service account token has expired".into());
        }
        if now < claims.nbf {
            return Err("service account token is not valid yet".into());
        }
        Ok(claims)
    }

    /// Verification, then that the service account and the bound pod still exist with the
    /// uids the token names.
    pub fn authenticate(
        &self,
        token: &str,
        audiences: &[String],
        lookup: Lookup,
        now: i64,
    ) -> Result<Claims, String> {
        let claims = self.verify(token, audiences, now)?;
        let k = &claims.kubernetes;
        let current = |plural: &str, r: &Ref| {
            let obj = lookup(plural, &k.namespace, &r.name);
            let uid = obj
                .as_ref()
                .and_then(|o| o.pointer("/metadata/uid"))
                .and_then(Value::as_str);
            let deleting = obj
                .as_ref()
                .and_then(|o| o.pointer("/metadata/deletionTimestamp"))
                .is_some_and(|d| !d.is_null());
            match uid {
                None => Err(format!("{plural} {}/{} not found", k.namespace, r.name)),
                Some(u) if u != r.uid => Err(format!(
                    "{plural} {}/{} uid ({}) does not match the token's ({})",
                    k.namespace, r.name, u, r.uid
                )),
                Some(_) if deleting => Err(format!(
                    "{plural} {}/{} is being deleted",
                    k.namespace, r.name
                )),
                Some(_) => Ok(()),
            }
        };
        current("serviceaccounts", &k.serviceaccount)?;
        if let Some(pod) = &k.pod {
            current("pods", pod)?;
        }
        Ok(claims)
    }
}

fn decode_part<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, String> {
    let bytes = B64.decode(part).map_err(|_| "bad JWT encoding")?;
    serde_json::from_slice(&bytes).map_err(|e| format!("bad JWT content: {e}"))
}

#[cfg(test)]
mod tests;
