//! The "ipam" section, with host-local's keys, validated into a plan the allocator can use.

use std::net::IpAddr;
use std::path::PathBuf;

use ipnetwork::IpNetwork;
use serde::Deserialize;

use super::range::Range;
use crate::error::{CniError, Result};
use crate::result::Route;

pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";
pub const BUILTIN_TYPE: &str = "keelson-ipam";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRange {
    #[serde(default)]
    pub subnet: String,
    #[serde(default)]
    pub range_start: Option<String>,
    #[serde(default)]
    pub range_end: Option<String>,
    #[serde(default)]
    pub gateway: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawRoute {
    pub dst: String,
    #[serde(default)]
    pub gw: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpamConf {
    #[serde(default, rename = "type")]
    pub plugin_type: String,
    #[serde(flatten)]
    pub single: RawRange,
    #[serde(default)]
    pub ranges: Vec<Vec<RawRange>>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    #[serde(default)]
    pub data_dir: Option<String>,
}

/// What the allocator works from: one address is taken from each range set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpamPlan {
    pub range_sets: Vec<Vec<Range>>,
    pub routes: Vec<Route>,
    /// The network's own directory: `<dataDir>/<network name>`.
    pub dir: PathBuf,
}

impl IpamConf {
    pub fn is_builtin(&self) -> bool {
        self.plugin_type == BUILTIN_TYPE
    }

    pub fn plan(&self, network: &str) -> Result<IpamPlan> {
        if network.is_empty() || network.contains('/') || network == "." || network == ".." {
            return Err(CniError::config(format!(
                "network name {network:?} cannot name a directory under dataDir"
            )));
        }
        let raw_sets: Vec<Vec<RawRange>> = if !self.ranges.is_empty() {
            if !self.single.subnet.is_empty() {
                return Err(CniError::config(
                    "ipam: use either \"subnet\" or \"ranges\", not both",
                ));
            }
            self.ranges.clone()
        } else if !self.single.subnet.is_empty() {
            vec![vec![self.single.clone()]]
        } else {
            return Err(CniError::config("ipam: no \"subnet\" or \"ranges\" given"));
        };
        let mut range_sets = Vec::new();
        for (i, raw_set) in raw_sets.iter().enumerate() {
            let set = raw_set
                .iter()
                .map(parse_range)
                .collect::<Result<Vec<_>>>()?;
            let Some(first) = set.first() else {
                return Err(CniError::config(format!("ipam: range set {i} is empty")));
            };
            if set
                .iter()
                .any(|r| r.subnet.is_ipv4() != first.subnet.is_ipv4())
            {
                return Err(CniError::config(format!(
                    "ipam: range set {i} mixes IPv4 and IPv6"
                )));
            }
            range_sets.push(set);
        }
        let routes = self
            .routes
            .iter()
            .map(parse_route)
            .collect::<Result<Vec<_>>>()?;
        let base = self.data_dir.as_deref().unwrap_or(DEFAULT_DATA_DIR);
        Ok(IpamPlan {
            range_sets,
            routes,
            dir: PathBuf::from(base).join(network),
        })
    }
}

fn parse_ip(what: &str, s: &str) -> Result<IpAddr> {
    s.parse()
        .map_err(|_| CniError::config(format!("ipam: invalid {what} {s:?}: not an IP address")))
}

fn parse_range(raw: &RawRange) -> Result<Range> {
    let subnet: IpNetwork = raw.subnet.parse().map_err(|_| {
        CniError::config(format!(
            "ipam: invalid subnet {:?}: expected CIDR notation such as 10.22.0.0/16",
            raw.subnet
        ))
    })?;
    let opt = |what: &str, v: &Option<String>| -> Result<Option<IpAddr>> {
        v.as_deref().map(|s| parse_ip(what, s)).transpose()
    };
    Range::new(
        subnet,
        opt("rangeStart", &raw.range_start)?,
        opt("rangeEnd", &raw.range_end)?,
        opt("gateway", &raw.gateway)?,
    )
    .map_err(|e| CniError::config(format!("ipam: {e}")))
}

fn parse_route(raw: &RawRoute) -> Result<Route> {
    let dst: IpNetwork = raw.dst.parse().map_err(|_| {
        CniError::config(format!(
            "ipam: invalid route dst {:?}: expected CIDR",
            raw.dst
        ))
    })?;
    let gw = raw
        .gw
        .as_deref()
        .map(|g| parse_ip("route gw", g))
        .transpose()?;
    Ok(Route { dst, gw })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    fn conf(json: &str) -> IpamConf {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn single_subnet_form() {
        let plan = conf(
            r#"{"type":"keelson-ipam","subnet":"10.1.0.0/24","rangeStart":"10.1.0.10",
            "gateway":"10.1.0.254","routes":[{"dst":"0.0.0.0/0"}],"dataDir":"/tmp/x"}"#,
        )
        .plan("net1")
        .unwrap();
        assert_eq!(plan.range_sets.len(), 1);
        assert_eq!(plan.range_sets[0][0].start.to_string(), "10.1.0.10");
        assert_eq!(plan.range_sets[0][0].gateway.to_string(), "10.1.0.254");
        assert_eq!(plan.dir, PathBuf::from("/tmp/x/net1"));
        assert_eq!(plan.routes[0].dst.to_string(), "0.0.0.0/0");
    }

    #[test]
    fn ranges_form_dual_stack_and_default_dir() {
        let plan = conf(r#"{"ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/64"}]]}"#)
            .plan("n")
            .unwrap();
        assert_eq!(plan.range_sets.len(), 2);
        assert!(plan.range_sets[1][0].subnet.is_ipv6());
        assert_eq!(plan.dir, PathBuf::from("/var/lib/cni/networks/n"));
    }

    #[test]
    fn invalid_subnet_names_it() {
        let err = conf(r#"{"subnet":"10.1.0.0/99"}"#).plan("n").unwrap_err();
        assert_eq!(err.code, code::INVALID_CONFIG);
        assert!(err.msg.contains("10.1.0.0/99"), "{}", err.msg);
        let err = conf(r#"{}"#).plan("n").unwrap_err();
        assert!(err.msg.contains("subnet"));
        let err = conf(r#"{"subnet":"10.1.0.0/24"}"#)
            .plan("../x")
            .unwrap_err();
        assert_eq!(err.code, code::INVALID_CONFIG);
    }

    #[test]
    fn mixed_family_set_rejected() {
        let err = conf(r#"{"ranges":[[{"subnet":"10.1.0.0/24"},{"subnet":"fd00::/64"}]]}"#)
            .plan("n")
            .unwrap_err();
        assert!(err.msg.contains("mixes"));
    }
}
