//! Name and label syntax checks with upstream's messages (k8s.io/apimachinery/pkg/util/validation):
//! object names, label keys and values, ports, keys of data maps. Each returns the list of
//! problems; empty means valid.

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const QUALIFIED_MSG: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const ENV_VAR_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// The two checks most names get, in upstream's order: at most `max` bytes, and the syntax
/// (`msg` unless `syntax_ok`).
fn length_and_syntax(s: &str, max: usize, syntax_ok: bool, msg: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > max {
        errs.push(too_long(max));
    }
    if !syntax_ok {
        errs.push(msg.to_string());
    }
    errs
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` over a whole string.
fn dns_label_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` over a whole string.
fn qualified_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || matches!(c, b'-' | b'_' | b'.'))
}

pub fn dns1123_label(s: &str) -> Vec<String> {
    length_and_syntax(s, 63, dns_label_syntax(s), DNS1123_LABEL_MSG)
}

pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let syntax_ok = s.split('.').all(dns_label_syntax);
    length_and_syntax(s, 253, syntax_ok, DNS1123_SUBDOMAIN_MSG)
}

pub fn dns1035_label(s: &str) -> Vec<String> {
    let syntax_ok = dns_label_syntax(s) && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    length_and_syntax(s, 63, syntax_ok, DNS1035_LABEL_MSG)
}

/// Label and annotation keys: an optional DNS subdomain prefix, '/', and a name part.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if s.matches('/').count() > 1 {
        errs.push(QUALIFIED_MSG.to_string());
        return errs;
    }
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(
                dns1123_subdomain(prefix)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push(format!("name part {}", too_long(63)));
        }
        if !qualified_syntax(name) {
            errs.push(QUALIFIED_NAME_MSG.to_string());
        }
    }
    errs
}

pub fn label_value(s: &str) -> Vec<String> {
    let syntax_ok = s.is_empty() || qualified_syntax(s);
    length_and_syntax(s, 63, syntax_ok, LABEL_VALUE_MSG)
}

/// Keys of ConfigMap and Secret data.
pub fn config_map_key(s: &str) -> Vec<String> {
    let syntax_ok = !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    let mut errs = length_and_syntax(s, 253, syntax_ok, CONFIG_KEY_MSG);
    if s == "." {
        errs.push("must not be '.'".to_string());
    } else if s == ".." {
        errs.push("must not be '..'".to_string());
    } else if s.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// Named ports (IANA_SVC_NAME): at most 15 characters, lowercase letters, digits and single
/// hyphens, at least one letter.
pub fn port_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 15 {
        errs.push(too_long(15));
    }
    if !s
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if !s.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

pub fn env_var_name(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let ok = b.first().is_some_and(|c| !c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    let mut errs = Vec::new();
    if !ok {
        errs.push(ENV_VAR_MSG.to_string());
    }
    if s == "." || s == ".." || s.starts_with("..") {
        errs.push("must not be '.' or '..' or start with '..'".to_string());
    }
    errs
}

/// Port numbers: 1-65535.
pub fn port_number(n: i64) -> Vec<String> {
    if (1..=65535).contains(&n) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

pub fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// Why an address cannot be an endpoint, as upstream's ValidateEndpointIP says: node-local
/// addresses (unspecified, loopback, link-local such as the metadata service). Empty when it
/// may be one; IPv4-mapped IPv6 addresses count as their IPv4 address, as Go parses them.
pub fn endpoint_ip(text: &str) -> Vec<String> {
    use std::net::IpAddr;
    let Ok(ip) = text.parse::<IpAddr>() else {
        return vec!["must be a valid IP address".to_string()];
    };
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let (unspecified, loopback, link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            let multicast = (a, b, c) == (224, 0, 0);
            (
                v4.is_unspecified(),
                v4.is_loopback(),
                v4.is_link_local(),
                multicast,
            )
        }
        IpAddr::V6(v6) => {
            let [first, second, ..] = v6.octets();
            let multicast = first == 0xff && second & 0x0f == 0x02;
            let unicast = v6.is_unicast_link_local();
            (v6.is_unspecified(), v6.is_loopback(), unicast, multicast)
        }
    };
    let mut out = Vec::new();
    if unspecified {
        out.push(format!("may not be unspecified ({text})"));
    }
    if loopback {
        out.push("may not be in the loopback range (127.0.0.0/8, ::1/128)".to_string());
    }
    if link_local {
        out.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)".to_string());
    }
    if link_local_multicast {
        let msg = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
        out.push(msg.to_string());
    }
    out
}

/// Why a path is not one below its volume (upstream's validateLocalDescendingPath): it must
/// be relative and have no `..` element.
pub fn local_descending_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    if path.starts_with('/') {
        out.push("must be a relative path".to_string());
    }
    out.extend(no_backsteps(path));
    out
}

/// Upstream's validatePathNoBacksteps: no `..` element.
pub fn no_backsteps(path: &str) -> Option<String> {
    path.split(['/', '\\'])
        .any(|part| part == "..")
        .then(|| "must not contain '..'".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns1123_label("web-1").is_empty());
        assert!(dns1123_label("1web").is_empty());
        assert!(!dns1123_label("Web").is_empty());
        assert!(!dns1123_label("web-").is_empty());
        assert!(!dns1123_label("").is_empty());
        assert!(!dns1123_label(&"a".repeat(64)).is_empty());
        assert!(!dns1123_label("a.b").is_empty());
        assert!(dns1035_label("web").is_empty());
        assert!(!dns1035_label("1web").is_empty());
    }

    #[test]
    fn subdomains() {
        assert!(dns1123_subdomain("web-5d9c.abc").is_empty());
        assert!(!dns1123_subdomain("a..b").is_empty());
        assert!(!dns1123_subdomain(".a").is_empty());
        assert!(!dns1123_subdomain("a_b").is_empty());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name("app").is_empty());
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(qualified_name("Under_Score.x").is_empty());
        assert!(!qualified_name("/app").is_empty());
        assert!(!qualified_name("a/b/c").is_empty());
        assert!(!qualified_name("Bad_Prefix/x").is_empty());
        assert!(!qualified_name("-app").is_empty());
        assert!(!qualified_name("Example.com/name").is_empty());
        assert!(!qualified_name("example.com/").is_empty());
        assert!(!qualified_name(&"a".repeat(64)).is_empty());
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_3-x").is_empty());
        assert!(!label_value("has space").is_empty());
        assert!(!label_value("x-").is_empty());
        assert!(!label_value(&"v".repeat(64)).is_empty());
    }

    #[test]
    fn other_names() {
        assert!(config_map_key("app.conf").is_empty());
        assert!(!config_map_key("a/b").is_empty());
        assert!(!config_map_key("..data").is_empty());
        assert!(port_name("http").is_empty());
        assert!(!port_name("80").is_empty());
        assert!(!port_name("http--x").is_empty());
        assert!(!port_name("a-very-long-port-name").is_empty());
        assert!(env_var_name("MY_VAR.x").is_empty());
        assert!(!env_var_name("1VAR").is_empty());
        assert!(port_number(65535).is_empty());
        assert!(!port_number(0).is_empty());
        assert!(is_ip("10.0.0.1") && is_ip("fd00::1") && !is_ip("10.0.0"));
    }

    #[test]
    fn endpoint_addresses() {
        assert!(endpoint_ip("10.244.1.2").is_empty() && endpoint_ip("fd00::5").is_empty());
        let loopback = "may not be in the loopback range (127.0.0.0/8, ::1/128)";
        assert_eq!(endpoint_ip("127.0.0.9"), vec![loopback]);
        assert_eq!(endpoint_ip("::1"), vec![loopback]);
        assert_eq!(endpoint_ip("::ffff:127.0.0.1"), vec![loopback]);
        let link = "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
        assert_eq!(endpoint_ip("169.254.169.254"), vec![link]);
        assert_eq!(endpoint_ip("fe80::1"), vec![link]);
        assert_eq!(
            endpoint_ip("0.0.0.0"),
            vec!["may not be unspecified (0.0.0.0)"]
        );
        assert_eq!(endpoint_ip("224.0.0.251").len(), 1);
        assert_eq!(endpoint_ip("ff02::1").len(), 1);
        assert_eq!(endpoint_ip("x"), vec!["must be a valid IP address"]);
    }

    #[test]
    fn descending_paths() {
        assert!(local_descending_path("a/b..c/d").is_empty());
        assert_eq!(local_descending_path("/"), vec!["must be a relative path"]);
        assert_eq!(
            local_descending_path("a/../.."),
            vec!["must not contain '..'"]
        );
        assert_eq!(local_descending_path("/..").len(), 2);
        assert_eq!(no_backsteps("/var/log"), None);
    }
}
