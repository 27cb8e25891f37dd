//! CNI spec versions this plugin speaks, and the VERSION command's answer.

use crate::error::{code, CniError, Result};

pub const SUPPORTED: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
pub const LATEST: &str = "1.1.0";

/// Checks that `version` is one we can answer in.
pub fn require_supported(version: &str) -> Result<()> {
    if SUPPORTED.contains(&version) {
        return Ok(());
    }
    Err(CniError::new(
        code::INCOMPATIBLE_VERSION,
        format!("incompatible CNI version {version:?}"),
        format!("config asks for {version:?}; this plugin supports {SUPPORTED:?}"),
    ))
}

/// GC and STATUS exist only from spec 1.1.0 on.
pub fn at_least_1_1(version: &str) -> bool {
    parse(version) >= (1, 1, 0)
}

/// CHECK exists from spec 0.4.0 on.
pub fn has_check(version: &str) -> bool {
    parse(version) >= (0, 4, 0)
}

/// Results before 1.0.0 carry a "version" field on each IP.
pub fn pre_1_0(version: &str) -> bool {
    parse(version) < (1, 0, 0)
}

fn parse(version: &str) -> (u32, u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// The VERSION command's output for a given request version.
pub fn version_json(requested: &str) -> String {
    let shown = if requested.is_empty() {
        LATEST
    } else {
        requested
    };
    serde_json::json!({ "cniVersion": shown, "supportedVersions": SUPPORTED }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_versions_pass_unknown_fail_with_code_1() {
        assert!(require_supported("1.0.0").is_ok());
        assert!(require_supported("1.1.0").is_ok());
        let err = require_supported("9.9.9").unwrap_err();
        assert_eq!(err.code, code::INCOMPATIBLE_VERSION);
        assert!(err.msg.contains("9.9.9"));
    }

    #[test]
    fn version_ordering() {
        assert!(at_least_1_1("1.1.0"));
        assert!(!at_least_1_1("1.0.0"));
        assert!(pre_1_0("0.4.0"));
        assert!(has_check("0.4.0") && !has_check("0.3.1"));
        assert!(!pre_1_0("1.0.0"));
    }

    #[test]
    fn version_answer_lists_supported() {
        let v: serde_json::Value = serde_json::from_str(&version_json("1.0.0")).unwrap();
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(
            v["supportedVersions"].as_array().unwrap().len(),
            SUPPORTED.len()
        );
    }
}
