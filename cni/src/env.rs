//! The CNI_* environment variables, parsed and validated without touching the system.

use crate::error::{code, CniError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Gc,
    Status,
    Version,
}

impl Command {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "GC" => Command::Gc,
            "STATUS" => Command::Status,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniEnv {
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: Vec<(String, String)>,
    pub path: Vec<String>,
}

/// Reads the command and the variables it needs; `get` is `std::env::var` in production.
pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<(Command, CniEnv)> {
    let raw_cmd = get("CNI_COMMAND").unwrap_or_default();
    let cmd = Command::parse(&raw_cmd).ok_or_else(|| {
        CniError::new(
            code::INVALID_ENV,
            format!("unknown CNI_COMMAND {raw_cmd:?}"),
            "CNI_COMMAND must be one of ADD, DEL, CHECK, GC, STATUS, VERSION",
        )
    })?;
    let env = CniEnv {
        container_id: get("CNI_CONTAINERID").unwrap_or_default(),
        netns: get("CNI_NETNS").unwrap_or_default(),
        ifname: get("CNI_IFNAME").unwrap_or_default(),
        args: parse_args(&get("CNI_ARGS").unwrap_or_default())?,
        path: get("CNI_PATH")
            .unwrap_or_default()
            .split(':')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
    };
    let mut missing = Vec::new();
    let needs_attachment = matches!(cmd, Command::Add | Command::Del | Command::Check);
    if needs_attachment && env.container_id.is_empty() {
        missing.push("CNI_CONTAINERID");
    }
    if needs_attachment && env.ifname.is_empty() {
        missing.push("CNI_IFNAME");
    }
    // DEL may be called after the namespace is gone; ADD and CHECK need it.
    if matches!(cmd, Command::Add | Command::Check) && env.netns.is_empty() {
        missing.push("CNI_NETNS");
    }
    if !missing.is_empty() {
        return Err(CniError::new(
            code::INVALID_ENV,
            format!(
                "required environment variables missing: {}",
                missing.join(", ")
            ),
            format!("{raw_cmd} needs {}", missing.join(", ")),
        ));
    }
    if needs_attachment {
        validate_container_id(&env.container_id)?;
        validate_ifname(&env.ifname)?;
    }
    Ok((cmd, env))
}

fn parse_args(raw: &str) -> Result<Vec<(String, String)>> {
    raw.split(';')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CniError::new(
                code::INVALID_ENV,
                format!("invalid CNI_ARGS pair {kv:?}"),
                "CNI_ARGS must be KEY=VALUE pairs separated by ';'",
            )),
        })
        .collect()
}

/// The spec's container ID grammar: alphanumerics plus `_ . -`, starting alphanumeric.
pub fn validate_container_id(id: &str) -> Result<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        return Ok(());
    }
    Err(CniError::new(
        code::INVALID_ENV,
        format!("invalid CNI_CONTAINERID {id:?}"),
        "a container ID holds letters, digits, '_', '.', '-' and starts with a letter or digit",
    ))
}

/// Linux interface names: 1..=15 bytes, no '/', ':' or whitespace, not "." or "..".
pub fn validate_ifname(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    if ok {
        return Ok(());
    }
    Err(CniError::new(
        code::INVALID_ENV,
        format!("invalid CNI_IFNAME {name:?}"),
        "an interface name is 1 to 15 characters without '/', ':' or spaces",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn add_needs_netns() {
        let err = parse(env_of(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
        ]))
        .unwrap_err();
        assert_eq!(err.code, code::INVALID_ENV);
        assert!(err.msg.contains("CNI_NETNS"), "{}", err.msg);
    }

    #[test]
    fn del_without_netns_is_fine() {
        let (cmd, env) = parse(env_of(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
            ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=web"),
        ]))
        .unwrap();
        assert_eq!(cmd, Command::Del);
        assert_eq!(env.path, vec!["/opt/cni/bin", "/usr/lib/cni"]);
        assert_eq!(env.args[1], ("K8S_POD_NAME".into(), "web".into()));
    }

    #[test]
    fn bad_names_rejected() {
        assert!(validate_ifname("a/b").is_err());
        assert!(validate_ifname("0123456789abcdef").is_err());
        assert!(validate_ifname("eth0").is_ok());
        assert!(validate_container_id("-x").is_err());
        assert!(validate_container_id("abc_1.2-3").is_ok());
    }

    #[test]
    fn unknown_command_is_code_4() {
        let err = parse(env_of(&[("CNI_COMMAND", "FOO")])).unwrap_err();
        assert_eq!(err.code, code::INVALID_ENV);
    }
}
