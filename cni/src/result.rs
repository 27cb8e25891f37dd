//! The CNI result object (ADD's output, prevResult's input), shaped like the reference plugins'.

use std::net::IpAddr;

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};

use crate::version;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IpConfig {
    /// Index into `interfaces`, not a kernel ifindex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
    pub address: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Only in results before 1.0.0 ("4" or "6").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Route {
    pub dst: IpNetwork,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Dns {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CniResult {
    #[serde(default)]
    pub cni_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default)]
    pub ips: Vec<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(default)]
    pub dns: Dns,
}

impl CniResult {
    /// Renders the result for the version the runtime asked for.
    pub fn to_json(&self, cni_version: &str) -> String {
        let mut out = self.clone();
        out.cni_version = cni_version.to_string();
        let old = version::pre_1_0(cni_version);
        for ip in &mut out.ips {
            ip.version = old.then(|| if ip.address.is_ipv4() { "4" } else { "6" }.to_string());
        }
        serde_json::to_string(&out).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CniResult {
        CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: "aa:bb:cc:dd:ee:ff".into(),
                sandbox: "/var/run/netns/x".into(),
                ..Default::default()
            }],
            ips: vec![IpConfig {
                interface: Some(0),
                address: "10.1.0.2/24".parse().unwrap(),
                gateway: Some("10.1.0.1".parse().unwrap()),
                version: None,
            }],
            routes: vec![Route {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn shape_matches_reference() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json("1.0.0")).unwrap();
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["ips"][0]["interface"], 0);
        assert_eq!(v["ips"][0]["address"], "10.1.0.2/24");
        assert_eq!(v["ips"][0]["gateway"], "10.1.0.1");
        assert!(v["ips"][0].get("version").is_none());
        assert_eq!(v["routes"][0]["dst"], "0.0.0.0/0");
        assert_eq!(v["interfaces"][0]["sandbox"], "/var/run/netns/x");
        assert!(v["dns"].as_object().unwrap().is_empty());
    }

    #[test]
    fn old_versions_get_ip_version() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json("0.4.0")).unwrap();
        assert_eq!(v["ips"][0]["version"], "4");
    }

    #[test]
    fn round_trips_as_prev_result() {
        let text = sample().to_json("1.1.0");
        let back: CniResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ips, sample().ips);
    }
}
