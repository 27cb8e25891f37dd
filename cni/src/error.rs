//! The CNI error object (spec section "Error") and the codes this plugin uses.

use serde::Serialize;

/// Error codes from the CNI spec, plus this plugin's own (100 and up).
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODE_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const NOT_AVAILABLE: u32 = 50;
    /// A netlink request to the kernel failed.
    pub const NETLINK: u32 = 100;
    /// No free address left in a range set.
    pub const RANGE_EXHAUSTED: u32 = 101;
    /// CHECK found state that differs from the previous result.
    pub const CHECK_FAILED: u32 = 102;
    /// Installing or removing masquerade rules failed.
    pub const FIREWALL: u32 = 103;
    /// A delegated IPAM plugin could not be run.
    pub const DELEGATE: u32 = 104;
}

/// What a CNI plugin prints on stdout when it fails (and exits non-zero).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{msg} ({details})")]
pub struct CniError {
    #[serde(rename = "cniVersion", skip_serializing_if = "String::is_empty")]
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        CniError {
            cni_version: String::new(),
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    pub fn io(what: impl Into<String>, err: &std::io::Error) -> Self {
        Self::new(code::IO_FAILURE, what, err.to_string())
    }

    pub fn netlink(what: impl Into<String>, err: &std::io::Error) -> Self {
        Self::new(code::NETLINK, what, err.to_string())
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_CONFIG, msg, "fix the network configuration")
    }

    /// Stamps the version the caller asked for, so the runtime can parse the error.
    pub fn with_version(mut self, version: &str) -> Self {
        self.cni_version = version.to_string();
        self
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|_| format!("{{\"code\":{},\"msg\":\"unprintable error\"}}", self.code))
    }
}

pub type Result<T> = std::result::Result<T, CniError>;
