//! Who sent a request: a client certificate signed by the client CA (`x509`), a static bearer
//! token in kube-apiserver's token file format (`token,user,uid,"group1,group2"` per line), a
//! service-account token (`serviceaccount`), or a bootstrap token (`bootstrap`); and what
//! bootstrap users may do (`authorize`).

pub mod attributes;
pub mod authorize;
pub mod bootstrap;
pub mod certs;
pub mod node;
pub mod policy;
pub mod rbac;
pub mod serviceaccount;
pub mod watched;
pub mod x509;

use keelson_apimachinery::well_known::AUTHENTICATED_GROUP;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl User {
    /// Who a request without credentials is, as upstream's anonymous authenticator names it.
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
}

/// Credentials were presented and are not valid: 401, never anonymous.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("invalid credentials: {0}")]
pub struct Unauthorized(pub String);

/// The request's user: from its verified client certificate, else its bearer token (static,
/// then service-account, then bootstrap; `lookup` reads the objects those refer to). Ok(None)
/// when it carries no credentials. Every authenticated user is also in system:authenticated.
pub fn authenticate(
    tokens: &Tokens,
    service_accounts: &serviceaccount::TokenKeys,
    lookup: serviceaccount::Lookup,
    authorization: Option<&str>,
    client_cert: Option<&[u8]>,
) -> Result<Option<User>, Unauthorized> {
    let user = match (client_cert.and_then(x509::user), authorization) {
        (Some(u), _) => u,
        (None, None) => return Ok(None),
        (None, Some(header)) => {
            let Some(token) = bearer_token(header) else {
                return Err(Unauthorized("not a bearer token".into()));
            };
            let audiences = &service_accounts.api_audiences;
            review_token(tokens, service_accounts, lookup, token, audiences)?.user
        }
    };
    Ok(Some(with_authenticated(user)))
}

/// The token of an `Authorization` header; the scheme is read in any case ("bearer", "BEARER"),
/// as upstream's bearer token authenticator reads it. None for another scheme.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Who a bearer token stands for, as a TokenReview answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    pub user: User,
    /// The user's extra (service-account tokens: the bound pod and node).
    pub extra: Value,
    /// The audiences the token is valid for, among those asked for.
    pub audiences: Vec<String>,
}

/// A bearer token checked against static tokens, then service-account tokens (signed JWTs),
/// then bootstrap tokens. A token without audiences (static, bootstrap) is valid for any.
pub fn review_token(
    tokens: &Tokens,
    service_accounts: &serviceaccount::TokenKeys,
    lookup: serviceaccount::Lookup,
    token: &str,
    audiences: &[String],
) -> Result<Reviewed, Unauthorized> {
    let plain = |user: User| Reviewed {
        user,
        extra: Value::Object(Default::default()),
        audiences: audiences.to_vec(),
    };
    if let Some(u) = tokens.by_token.get(token) {
        return Ok(plain(u.clone()));
    }
    if token.split('.').count() == 3 {
        let now = chrono::Utc::now().timestamp();
        let claims = service_accounts
            .authenticate(token, audiences, lookup, now)
            .map_err(Unauthorized)?;
        return Ok(Reviewed {
            user: claims.user(),
            extra: claims.extra(),
            audiences: claims
                .aud
                .iter()
                .filter(|a| audiences.contains(a))
                .cloned()
                .collect(),
        });
    }
    let (id, token_secret) =
        bootstrap::parse_token(token).ok_or_else(|| Unauthorized("unknown bearer token".into()))?;
    let stored = lookup("secrets", "kube-system", &bootstrap::secret_name(id));
    bootstrap::authenticate(stored.as_ref(), id, token_secret, chrono::Utc::now())
        .map(plain)
        .map_err(|e| Unauthorized(e.to_string()))
}

/// `user`, also in system:authenticated.
pub fn with_authenticated(mut user: User) -> User {
    if !user.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        user.groups.push(AUTHENTICATED_GROUP.into());
    }
    user
}

#[derive(Debug, Default, Clone)]
pub struct Tokens {
    by_token: HashMap<String, User>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {msg}")]
    Parse {
        path: String,
        line: usize,
        msg: String,
    },
}

/// Splits one CSV line, honouring double quotes around a field.
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out.into_iter().map(|f| f.trim().to_string()).collect()
}

impl Tokens {
    pub fn parse(text: &str, path: &str) -> Result<Tokens, TokenFileError> {
        let mut t = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f = csv_fields(line);
            let (token, name, uid, groups) = match f.as_slice() {
                [token, name, uid, rest @ ..] if !token.is_empty() && !name.is_empty() => {
                    (token, name, uid, rest.first())
                }
                _ => {
                    return Err(TokenFileError::Parse {
                        path: path.into(),
                        line: i + 1,
                        msg: "want at least token,user,uid".into(),
                    })
                }
            };
            let groups = groups
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            t.insert(
                token,
                User {
                    name: name.clone(),
                    uid: uid.clone(),
                    groups,
                },
            );
        }
        Ok(t)
    }

    pub fn load(path: &Path) -> Result<Tokens, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Tokens::parse(&text, &path.display().to_string())
    }

    pub fn insert(&mut self, token: &str, user: User) {
        self.by_token.insert(token.to_string(), user);
    }

    /// The user for an `Authorization` header value, if it carries a known bearer token.
    pub fn authenticate(&self, header: Option<&str>) -> Option<&User> {
        let token = bearer_token(header?)?;
        self.by_token.get(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_apiserver_token_file() {
        let t = Tokens::parse(
            "# comment\nabc,alice,1,\"system:masters,dev\"\nxyz,bob,2\n",
            "f",
        )
        .unwrap();
        let a = t.authenticate(Some("Bearer abc")).unwrap();
        assert_eq!(a.name, "alice");
        assert_eq!(a.groups, vec!["system:masters", "dev"]);
        assert!(t
            .authenticate(Some("Bearer xyz"))
            .unwrap()
            .groups
            .is_empty());
        assert!(t.authenticate(Some("Bearer nope")).is_none());
        assert!(t.authenticate(None).is_none());
        assert!(t.authenticate(Some("Basic abc")).is_none());
    }

    #[test]
    fn rejects_short_lines_with_line_number() {
        let e = Tokens::parse("ok,u,1\nbad\n", "tokens.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "tokens.csv line 2: want at least token,user,uid"
        );
    }
}
