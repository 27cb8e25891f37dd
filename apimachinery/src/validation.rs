//! Label key and value validation (qualified names, label values), as upstream
//! `k8s.io/apimachinery/pkg/util/validation`.

const NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_EXAMPLES: &str = "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const PREFIX_MSG: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const MAX_NAME_LEN: usize = 63;
const MAX_PREFIX_LEN: usize = 253;

/// Alphanumeric at both ends, `-`, `_`, `.` inside. Empty is rejected here.
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(f), Some(l)) if f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric() => bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')),
        _ => false,
    }
}

/// Lowercase RFC 1123 subdomain: dot-separated labels of `[a-z0-9-]`, alphanumeric at the ends.
fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_PREFIX_LEN
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    (f.is_ascii_lowercase() || f.is_ascii_digit())
                        && (l.is_ascii_lowercase() || l.is_ascii_digit())
                        && b.iter()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                }
                _ => false,
            }
        })
}

/// Checks a label key (`[prefix/]name`). Returns the upstream error texts.
pub(crate) fn qualified_name_errors(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            let mut errs = Vec::new();
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else if !is_dns1123_subdomain(prefix) {
                errs.push(PREFIX_MSG.to_string());
            }
            if !errs.is_empty() {
                return errs;
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character {NAME_EXAMPLES} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > MAX_NAME_LEN {
        errs.push(format!(
            "name part must be no more than {MAX_NAME_LEN} characters"
        ));
    }
    if !name.is_empty() && !is_name_part(name) {
        errs.push(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character {NAME_EXAMPLES}"
        ));
    }
    errs
}

/// Checks a label value: empty, or a name part of at most 63 characters.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > MAX_NAME_LEN {
        errs.push(format!("must be no more than {MAX_NAME_LEN} characters"));
    }
    if !value.is_empty() && !is_name_part(value) {
        errs.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({NAME_FMT})?')"
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("app").is_empty());
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert!(qualified_name_errors("A_b-c.D").is_empty());
        assert!(!qualified_name_errors("-app").is_empty());
        assert!(!qualified_name_errors("a/b/c").is_empty());
        assert!(!qualified_name_errors("/name").is_empty());
        assert!(!qualified_name_errors("Example.com/name").is_empty());
        assert!(!qualified_name_errors("example.com/").is_empty());
        assert!(!qualified_name_errors(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn label_values() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_3-x").is_empty());
        assert!(!label_value_errors("a b").is_empty());
        assert!(!label_value_errors("x-").is_empty());
        assert!(!label_value_errors(&"v".repeat(64)).is_empty());
    }
}
