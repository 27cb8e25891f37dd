//! Bootstrap tokens as kube-apiserver's bootstrap token authenticator reads them: a bearer
//! token `<token-id>.<token-secret>` names the Secret `kube-system/bootstrap-token-<token-id>`
//! of type `bootstrap.kubernetes.io/token`, which must hold the same secret, allow
//! authentication and not have expired.

use super::User;
use chrono::{DateTime, Utc};
use keelson_apimachinery::base64;
use keelson_apimachinery::well_known::{
    BOOTSTRAPPERS_GROUP, BOOTSTRAP_TOKEN_SECRET_PREFIX, SECRET_TYPE_BOOTSTRAP_TOKEN,
};
use serde_json::Value;

/// Why a bootstrap token was refused (logged; the client only sees 401).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Rejected {
    #[error("no Secret kube-system/{0}")]
    NoSecret(String),
    #[error("Secret kube-system/{0} is not of type {SECRET_TYPE_BOOTSTRAP_TOKEN}")]
    WrongType(String),
    #[error("Secret kube-system/{0} is being deleted")]
    Deleting(String),
    #[error("the token does not match Secret kube-system/{0}")]
    WrongSecret(String),
    #[error(
        "Secret kube-system/{0} does not allow authentication (usage-bootstrap-authentication)"
    )]
    NotForAuthentication(String),
    #[error("Secret kube-system/{0} expired at {1}")]
    Expired(String, String),
    #[error("Secret kube-system/{0} has an expiration that is not RFC 3339: {1:?}")]
    BadExpiration(String, String),
    #[error("Secret kube-system/{0} has an extra group outside system:bootstrappers: {1:?}")]
    BadGroup(String, String),
}

/// Splits a bearer token of the form `[a-z0-9]{6}.[a-z0-9]{16}` into (token-id, token-secret).
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// The name of the Secret that holds token `id`.
pub fn secret_name(id: &str) -> String {
    format!("{BOOTSTRAP_TOKEN_SECRET_PREFIX}{id}")
}

/// A data key of the Secret, decoded; "" when absent or not base64 UTF-8.
fn data(secret: &Value, key: &str) -> String {
    secret
        .pointer(&format!("/data/{key}"))
        .and_then(Value::as_str)
        .and_then(base64::decode)
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// The user a valid token authenticates as: `system:bootstrap:<id>` in system:bootstrappers
/// and the Secret's auth-extra-groups.
pub fn authenticate(
    secret: Option<&Value>,
    id: &str,
    token_secret: &str,
    now: DateTime<Utc>,
) -> Result<User, Rejected> {
    let name = secret_name(id);
    let secret = secret.ok_or_else(|| Rejected::NoSecret(name.clone()))?;
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE_BOOTSTRAP_TOKEN) {
        return Err(Rejected::WrongType(name));
    }
    if secret
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return Err(Rejected::Deleting(name));
    }
    let (stored_id, stored_secret) = (data(secret, "token-id"), data(secret, "token-secret"));
    if stored_id != id || !same(stored_secret.as_bytes(), token_secret.as_bytes()) {
        return Err(Rejected::WrongSecret(name));
    }
    if data(secret, "usage-bootstrap-authentication") != "true" {
        return Err(Rejected::NotForAuthentication(name));
    }
    let expiration = data(secret, "expiration");
    if !expiration.is_empty() {
        let at = DateTime::parse_from_rfc3339(&expiration)
            .map_err(|_| Rejected::BadExpiration(name.clone(), expiration.clone()))?;
        if now >= at {
            return Err(Rejected::Expired(name, expiration));
        }
    }
    let mut groups = vec![BOOTSTRAPPERS_GROUP.to_string()];
    for g in data(secret, "auth-extra-groups").split(',').map(str::trim) {
        if g.is_empty() {
            continue;
        }
        if !extra_group_ok(g) {
            return Err(Rejected::BadGroup(name, g.to_string()));
        }
        if !groups.iter().any(|have| have == g) {
            groups.push(g.to_string());
        }
    }
    Ok(User {
        name: format!("system:bootstrap:{id}"),
        uid: String::new(),
        groups,
    })
}

/// `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`, as upstream's BootstrapGroupPattern.
fn extra_group_ok(g: &str) -> bool {
    let Some(rest) = g.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !rest.is_empty()
        && rest.len() <= 256
        && rest.bytes().all(|b| allowed(b) || b == b':' || b == b'-')
        && rest.bytes().last().is_some_and(allowed)
}

/// Compares secrets in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(fields: &[(&str, &str)]) -> Value {
        let data: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), json!(base64::encode(v.as_bytes()))))
            .collect();
        json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token", "data": data})
    }

    fn good() -> Vec<(&'static str, &'static str)> {
        vec![
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
            ("expiration", "2030-01-01T00:00:00Z"),
        ]
    }

    fn now() -> DateTime<Utc> {
        "2026-12-03T06:00:00Z".parse().unwrap()
    }

    #[test]
    fn token_format() {
        assert_eq!(
            parse_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        for bad in [
            "abcdef0123456789abcdef",
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef.0123456789abcdefg",
            "abcdef.0123456789abcde_",
            "abc.def.0123456789abcdef",
            "",
        ] {
            assert_eq!(parse_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_valid_token_is_a_bootstrapper() {
        let mut fields = good();
        fields.push((
            "auth-extra-groups",
            "system:bootstrappers:kubeadm:default-node-token",
        ));
        let s = secret(&fields);
        let u = authenticate(Some(&s), "abcdef", "0123456789abcdef", now()).unwrap();
        assert_eq!(u.name, "system:bootstrap:abcdef");
        assert_eq!(
            u.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token"
            ]
        );
    }

    #[test]
    fn expiry_is_checked_against_now() {
        let s = secret(&good());
        let after: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
        assert!(matches!(
            authenticate(Some(&s), "abcdef", "0123456789abcdef", after),
            Err(Rejected::Expired(..))
        ));
        let before: DateTime<Utc> = "2029-12-31T23:59:59Z".parse().unwrap();
        assert!(authenticate(Some(&s), "abcdef", "0123456789abcdef", before).is_ok());
        let mut fields = good();
        fields[3] = ("expiration", "tomorrow");
        let s = secret(&fields);
        assert!(matches!(
            authenticate(Some(&s), "abcdef", "0123456789abcdef", now()),
            Err(Rejected::BadExpiration(..))
        ));
        // No expiration at all: valid until deleted, as upstream.
        fields.remove(3);
        let s = secret(&fields);
        assert!(authenticate(Some(&s), "abcdef", "0123456789abcdef", now()).is_ok());
    }

    #[test]
    fn refusals() {
        let check = |s: Option<&Value>, token_secret: &str| {
            authenticate(s, "abcdef", token_secret, now()).unwrap_err()
        };
        let s = secret(&good());
        assert!(matches!(
            check(Some(&s), "0123456789abcdee"),
            Rejected::WrongSecret(_)
        ));
        assert!(matches!(
            check(None, "0123456789abcdef"),
            Rejected::NoSecret(_)
        ));
        let mut opaque = s.clone();
        opaque["type"] = json!("Opaque");
        assert!(matches!(
            check(Some(&opaque), "0123456789abcdef"),
            Rejected::WrongType(_)
        ));
        let mut deleting = s.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-12-03T05:00:00Z");
        assert!(matches!(
            check(Some(&deleting), "0123456789abcdef"),
            Rejected::Deleting(_)
        ));
        let mut fields = good();
        fields[2] = ("usage-bootstrap-authentication", "false");
        let no_usage = secret(&fields);
        assert!(matches!(
            check(Some(&no_usage), "0123456789abcdef"),
            Rejected::NotForAuthentication(_)
        ));
        let mut fields = good();
        fields.push(("auth-extra-groups", "system:masters"));
        let escalating = secret(&fields);
        assert!(matches!(
            check(Some(&escalating), "0123456789abcdef"),
            Rejected::BadGroup(..)
        ));
    }
}
