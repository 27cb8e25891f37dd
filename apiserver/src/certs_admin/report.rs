//! What `certs check` prints, and a kubeconfig's embedded client certificate. Pure.

use keelson_apimachinery::base64;

/// One certificate as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub name: String,
    /// The subject (RFC 4514 form), or why the certificate could not be read.
    pub subject: Result<String, String>,
    pub not_after: i64,
}

pub fn describe(name: &str, pem: &str) -> Found {
    let parsed = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .find(|b| b.label == "CERTIFICATE")
        .ok_or_else(|| "no certificate".to_string())
        .and_then(|b| {
            let cert = b.parse_x509().map_err(|e| e.to_string())?;
            Ok((
                cert.subject().to_string(),
                cert.validity().not_after.timestamp(),
            ))
        });
    match parsed {
        Ok((subject, not_after)) => Found {
            name: name.to_string(),
            subject: Ok(subject),
            not_after,
        },
        Err(why) => Found {
            name: name.to_string(),
            subject: Err(why),
            not_after: 0,
        },
    }
}

/// `YYYY-MM-DD HH:MM UTC` of a unix time.
fn date(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .map(|t| {
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02} UTC",
                t.year(),
                t.month() as u8,
                t.day(),
                t.hour(),
                t.minute()
            )
        })
        .unwrap_or_else(|_| unix.to_string())
}

/// The table (certificate, expiry, days left, subject) and whether every certificate is
/// readable and valid for more than `within_days` days after `now`.
pub fn table(found: &[Found], within_days: i64, now: i64) -> (String, bool) {
    let width = found
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(0)
        .max(11);
    let mut out = format!(
        "{:width$}  {:20}  {:>9}  SUBJECT\n",
        "CERTIFICATE", "EXPIRES", "DAYS LEFT"
    );
    let mut ok = true;
    for f in found {
        match &f.subject {
            Ok(subject) => {
                let days = (f.not_after - now).div_euclid(86_400);
                let mark = if f.not_after - now <= within_days * 86_400 {
                    ok = false;
                    "  <- expires within the limit"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{:width$}  {:20}  {:>9}  {subject}{mark}\n",
                    f.name,
                    date(f.not_after),
                    days
                ));
            }
            Err(why) => {
                ok = false;
                out.push_str(&format!("{:width$}  unreadable: {why}\n", f.name));
            }
        }
    }
    (out, ok)
}

/// The value of `key:` on a line of `text` (a kubeconfig as written by the tools).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// The client certificate and key (PEM) embedded in a kubeconfig, if it has them.
pub fn kubeconfig_pair(text: &str) -> Option<(String, String)> {
    let decode = |key| {
        let raw = base64::decode(field(text, key)?)?;
        String::from_utf8(raw).ok()
    };
    Some((
        decode("client-certificate-data")?,
        decode("client-key-data")?,
    ))
}

/// The kubeconfig with `cert_pem` as its client-certificate-data, the rest unchanged.
pub fn with_certificate(text: &str, cert_pem: &str) -> Result<String, String> {
    let old = field(text, "client-certificate-data")
        .ok_or_else(|| "no client-certificate-data".to_string())?;
    let new = base64::encode(cert_pem.as_bytes());
    Ok(text.replacen(old, &new, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(name: &str, days: i64) -> Found {
        Found {
            name: name.into(),
            subject: Ok("CN=x".into()),
            not_after: 1_767_225_600 + days * 86_400,
        }
    }

    #[test]
    fn the_table_flags_what_expires_within_the_limit() {
        let now = 1_767_225_600;
        let (text, ok) = table(
            &[found("apiserver.crt", 365), found("ca.crt", 3650)],
            30,
            now,
        );
        assert!(ok, "{text}");
        assert!(
            text.contains("apiserver.crt  2027-01-01 00:00 UTC        365  CN=x"),
            "{text}"
        );
        let (text, ok) = table(&[found("apiserver.crt", 10)], 30, now);
        assert!(!ok && text.contains("expires within"), "{text}");
        let (_, ok) = table(&[found("old.crt", -1)], 0, now);
        assert!(!ok, "an expired certificate fails even with no margin");
        let bad = describe("junk.crt", "junk");
        let (text, ok) = table(&[bad], 30, now);
        assert!(!ok && text.contains("unreadable: no certificate"), "{text}");
    }

    #[test]
    fn a_kubeconfigs_certificate_is_read_and_replaced_in_place() {
        let kc = format!(
            "users:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            base64::encode(b"CERT"),
            base64::encode(b"KEY")
        );
        assert_eq!(kubeconfig_pair(&kc), Some(("CERT".into(), "KEY".into())));
        let updated = with_certificate(&kc, "NEW").unwrap();
        assert_eq!(
            kubeconfig_pair(&updated),
            Some(("NEW".into(), "KEY".into()))
        );
        assert_eq!(kubeconfig_pair("users: []\n"), None);
        assert!(with_certificate("users: []\n", "NEW").is_err());
    }
}
