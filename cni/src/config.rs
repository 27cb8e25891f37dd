//! The network configuration on stdin (one plugin's entry of a conflist, as the runtime passes it).
//! Keys follow the reference `bridge` plugin so existing configurations work unchanged.

use std::collections::HashSet;
use std::net::IpAddr;

use serde::Deserialize;

use crate::error::{code, CniError, Result};
use crate::ipam::config::IpamConf;
use crate::ipam::store::Owner;
use crate::result::CniResult;
use crate::version;

pub const DEFAULT_BRIDGE: &str = "cni0";

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Hash)]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    #[serde(default)]
    pub cni_version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub plugin_type: String,
    #[serde(default)]
    pub bridge: Option<String>,
    #[serde(default)]
    pub is_gateway: bool,
    #[serde(default)]
    pub is_default_gateway: bool,
    #[serde(default)]
    pub ip_masq: bool,
    /// Destinations `ipMasq` leaves alone besides the pod's own subnet: the cluster's pod
    /// network, so that pods on other nodes see the client pod's address.
    #[serde(default, rename = "nonMasqueradeCIDRs")]
    pub non_masquerade_cidrs: Vec<ipnetwork::IpNetwork>,
    #[serde(default)]
    pub hairpin_mode: bool,
    #[serde(default)]
    pub promisc_mode: bool,
    #[serde(default)]
    pub mtu: Option<u32>,
    /// Wait for the kernel to unregister the veth pair in DEL (see `reaper`).
    #[serde(default)]
    pub sync_delete: bool,
    #[serde(default)]
    pub ipam: Option<IpamConf>,
    #[serde(default)]
    pub prev_result: Option<CniResult>,
    #[serde(default, rename = "cni.dev/valid-attachments")]
    pub valid_attachments: Option<Vec<Attachment>>,
}

impl NetConf {
    /// Decodes stdin; a decode failure is code 6, an unknown version code 1.
    pub fn parse(stdin: &[u8]) -> Result<NetConf> {
        let conf: NetConf = serde_json::from_slice(stdin).map_err(|e| {
            CniError::new(
                code::DECODE_FAILURE,
                format!("failed to decode the network configuration on stdin: {e}"),
                "stdin must hold one JSON network configuration",
            )
        })?;
        version::require_supported(&conf.cni_version)?;
        if conf.name.is_empty() {
            return Err(CniError::config("network configuration has no \"name\""));
        }
        if conf.mtu == Some(0) || conf.mtu.is_some_and(|m| m < 68) {
            return Err(CniError::config(format!(
                "invalid mtu {:?}: must be at least 68",
                conf.mtu.unwrap_or(0)
            )));
        }
        Ok(conf)
    }

    pub fn bridge_name(&self) -> &str {
        self.bridge.as_deref().unwrap_or(DEFAULT_BRIDGE)
    }

    /// The reference plugin treats isDefaultGateway as implying isGateway.
    pub fn gateway_on_bridge(&self) -> bool {
        self.is_gateway || self.is_default_gateway
    }

    pub fn ipam(&self) -> Result<&IpamConf> {
        self.ipam.as_ref().ok_or_else(|| {
            CniError::config(format!("network {:?} has no \"ipam\" section", self.name))
        })
    }

    /// The addresses of prevResult: where DEL and CHECK look first.
    pub fn prev_ips(&self) -> Vec<IpAddr> {
        self.prev_result
            .iter()
            .flat_map(|r| r.ips.iter().map(|ip| ip.address.ip()))
            .collect()
    }

    /// The attachments GC must keep (cni.dev/valid-attachments).
    pub fn valid_owners(&self) -> HashSet<Owner> {
        self.valid_attachments
            .iter()
            .flatten()
            .map(|a| Owner::new(&a.container_id, &a.ifname))
            .collect()
    }

    pub fn validate_bridge(&self) -> Result<()> {
        let name = self.bridge_name();
        crate::env::validate_ifname(name).map_err(|_| {
            CniError::config(format!("invalid bridge name {name:?}: 1 to 15 characters"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_bridge_keys_parse() {
        let conf = NetConf::parse(
            br#"{"cniVersion":"1.0.0","name":"k","type":"keelson-cni","bridge":"kbr0",
            "isGateway":true,"isDefaultGateway":true,"ipMasq":true,"hairpinMode":true,
            "promiscMode":true,"mtu":1400,"runtimeConfig":{"x":1},"capabilities":{"portMappings":true},
            "nonMasqueradeCIDRs":["10.244.0.0/16"],
            "ipam":{"type":"keelson-ipam","subnet":"10.1.0.0/24"}}"#,
        )
        .unwrap();
        assert_eq!(conf.bridge_name(), "kbr0");
        assert!(conf.ip_masq && conf.hairpin_mode && conf.promisc_mode);
        assert_eq!(conf.mtu, Some(1400));
        assert_eq!(
            conf.non_masquerade_cidrs,
            ["10.244.0.0/16".parse::<ipnetwork::IpNetwork>().unwrap()]
        );
        assert_eq!(conf.ipam().unwrap().plugin_type, "keelson-ipam");
    }

    #[test]
    fn defaults() {
        let conf =
            NetConf::parse(br#"{"cniVersion":"1.1.0","name":"k","type":"keelson-cni"}"#).unwrap();
        assert_eq!(conf.bridge_name(), "cni0");
        assert!(!conf.gateway_on_bridge());
        assert_eq!(conf.ipam().unwrap_err().code, code::INVALID_CONFIG);
    }

    #[test]
    fn malformed_is_code_6_unknown_version_code_1() {
        assert_eq!(
            NetConf::parse(b"{bad").unwrap_err().code,
            code::DECODE_FAILURE
        );
        let err = NetConf::parse(br#"{"cniVersion":"7.0.0","name":"k"}"#).unwrap_err();
        assert_eq!(err.code, code::INCOMPATIBLE_VERSION);
    }

    #[test]
    fn bad_non_masquerade_cidr_is_a_decode_failure() {
        let err = NetConf::parse(
            br#"{"cniVersion":"1.1.0","name":"k","type":"keelson-cni","nonMasqueradeCIDRs":["10.244.0.0/33"]}"#,
        )
        .unwrap_err();
        assert_eq!(err.code, code::DECODE_FAILURE);
        assert!(
            err.msg.contains("10.244.0.0/33") || err.msg.contains("prefix"),
            "{}",
            err.msg
        );
    }

    #[test]
    fn valid_attachments_parse() {
        let conf = NetConf::parse(
            br#"{"cniVersion":"1.1.0","name":"k","type":"keelson-cni",
            "cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}"#,
        )
        .unwrap();
        let valid = conf.valid_attachments.unwrap();
        assert_eq!(valid[0].container_id, "a");
    }
}
