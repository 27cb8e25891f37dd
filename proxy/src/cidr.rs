//! A small IPv4 CIDR type for --cluster-cidr.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::error::ProxyError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl FromStr for Ipv4Cidr {
    type Err = ProxyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |detail: &str| ProxyError::Config {
            option: "--cluster-cidr".into(),
            detail: format!("{s:?}: {detail} (expected an IPv4 CIDR like 10.244.0.0/16)"),
        };
        let (ip, prefix) = s.split_once('/').ok_or_else(|| bad("missing /prefix"))?;
        let addr: Ipv4Addr = ip.parse().map_err(|_| bad("bad address"))?;
        let prefix: u8 = prefix.parse().map_err(|_| bad("bad prefix"))?;
        if prefix > 32 {
            return Err(bad("prefix above 32"));
        }
        Ok(Ipv4Cidr::new(addr, prefix))
    }
}

impl Ipv4Cidr {
    /// The network of `addr` with `prefix` bits (the host bits cleared).
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Ipv4Cidr {
        let prefix = prefix.min(32);
        Ipv4Cidr {
            addr: Ipv4Addr::from(u32::from(addr) & mask(prefix)),
            prefix,
        }
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == u32::from(self.addr)
    }
}

fn mask(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalises() {
        let c: Ipv4Cidr = "10.244.1.7/16".parse().unwrap();
        assert_eq!(c.to_string(), "10.244.0.0/16");
        assert!("10.0.0.0".parse::<Ipv4Cidr>().is_err());
        assert!("10.0.0.0/33".parse::<Ipv4Cidr>().is_err());
        assert!(c.contains("10.244.255.1".parse().unwrap()));
        assert!(!c.contains("10.245.0.1".parse().unwrap()));
        let all = Ipv4Cidr::new("1.2.3.4".parse().unwrap(), 0);
        assert!(all.contains("9.9.9.9".parse().unwrap()));
        let one = Ipv4Cidr::new("1.2.3.4".parse().unwrap(), 32);
        assert!(
            one.contains("1.2.3.4".parse().unwrap()) && !one.contains("1.2.3.5".parse().unwrap())
        );
    }
}
