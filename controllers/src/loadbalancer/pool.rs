//! The addresses `--load-balancer-ip-range` hands to Services of type LoadBalancer: IPv4 ranges
//! "A-B" (inclusive), CIDRs (every address, network and broadcast too, as MetalLB) and single
//! addresses, comma-separated and not overlapping. Held as (first, last) pairs, so a /8 costs
//! no more than one address.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

const FLAG: &str = "--load-balancer-ip-range";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    #[error("{FLAG}: {0:?} is not an IPv4 range (A-B) or CIDR")]
    NotARange(String),
    #[error("{FLAG}: {0:?} ends before it starts; write the lower address first")]
    Reversed(String),
    #[error("{FLAG}: {0} overlaps {1}; give each address once")]
    Overlap(String, String),
}

/// How a part of the flag was written, kept to print it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Single,
    Range,
    Cidr(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    first: u32,
    last: u32,
    form: Form,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, last) = (Ipv4Addr::from(self.first), Ipv4Addr::from(self.last));
        match self.form {
            Form::Single => write!(f, "{first}"),
            Form::Range => write!(f, "{first}-{last}"),
            Form::Cidr(prefix) => write!(f, "{first}/{prefix}"),
        }
    }
}

impl FromStr for Part {
    type Err = PoolError;

    fn from_str(s: &str) -> Result<Part, PoolError> {
        let bad = || PoolError::NotARange(s.to_string());
        let addr = |a: &str| {
            a.trim()
                .parse::<Ipv4Addr>()
                .map(u32::from)
                .map_err(|_| bad())
        };
        if let Some((a, b)) = s.split_once('-') {
            let (first, last) = (addr(a)?, addr(b)?);
            if first > last {
                return Err(PoolError::Reversed(s.to_string()));
            }
            return Ok(Part {
                first,
                last,
                form: Form::Range,
            });
        }
        if let Some((a, p)) = s.split_once('/') {
            let prefix: u8 = p.trim().parse().ok().filter(|p| *p <= 32).ok_or_else(bad)?;
            // Host bits are ignored, as Go's net.ParseCIDR (and MetalLB) do.
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            let first = addr(a)? & mask;
            return Ok(Part {
                first,
                last: first | !mask,
                form: Form::Cidr(prefix),
            });
        }
        let ip = addr(s)?;
        Ok(Part {
            first: ip,
            last: ip,
            form: Form::Single,
        })
    }
}

/// The pool, in the order the flag gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    parts: Vec<Part>,
}

impl FromStr for Pool {
    type Err = PoolError;

    fn from_str(s: &str) -> Result<Pool, PoolError> {
        let parts = s
            .split(',')
            .map(|p| p.trim().parse())
            .collect::<Result<Vec<Part>, _>>()?;
        let pool = Pool { parts };
        let sorted = pool.sorted();
        for pair in sorted.windows(2) {
            if pair[1].first <= pair[0].last {
                return Err(PoolError::Overlap(pair[0].to_string(), pair[1].to_string()));
            }
        }
        Ok(pool)
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

impl Pool {
    fn sorted(&self) -> Vec<Part> {
        let mut parts = self.parts.clone();
        parts.sort_by_key(|p| p.first);
        parts
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        self.parts.iter().any(|p| p.first <= ip && ip <= p.last)
    }

    /// Every address, lowest first, computed as it goes.
    pub fn iter(&self) -> impl Iterator<Item = Ipv4Addr> {
        self.sorted()
            .into_iter()
            .flat_map(|p| (p.first..=p.last).map(Ipv4Addr::from))
    }

    /// How many addresses the pool holds (up to 2^32, for 0.0.0.0/0).
    pub fn len(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| u64::from(p.last - p.first) + 1)
            .sum()
    }

    /// Never true: the flag's value names at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(s: &str) -> Pool {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_cidrs_and_single_addresses() {
        let p = pool(" 10.0.0.20-10.0.0.21 , 10.0.0.0/30,10.0.0.9");
        assert_eq!(p.len(), 7);
        let all: Vec<String> = p.iter().map(|a| a.to_string()).collect();
        assert_eq!(
            all,
            [
                "10.0.0.0",
                "10.0.0.1",
                "10.0.0.2",
                "10.0.0.3",
                "10.0.0.9",
                "10.0.0.20",
                "10.0.0.21"
            ],
            "lowest first, network and broadcast of the CIDR included"
        );
        assert!(p.contains(ip("10.0.0.21")));
        assert!(p.contains(ip("10.0.0.3")));
        assert!(!p.contains(ip("10.0.0.4")));
        assert!(!p.contains(ip("10.0.0.22")));
        assert_eq!(p.to_string(), "10.0.0.20-10.0.0.21,10.0.0.0/30,10.0.0.9");
    }

    #[test]
    fn host_bits_of_a_cidr_are_dropped_and_a_one_address_range_is_allowed() {
        assert_eq!(pool("192.168.1.77/28").to_string(), "192.168.1.64/28");
        let one = pool("192.168.1.240-192.168.1.240");
        assert_eq!(one.len(), 1);
        assert_eq!(one.iter().collect::<Vec<_>>(), vec![ip("192.168.1.240")]);
    }

    #[test]
    fn huge_ranges_are_not_materialised() {
        let all = pool("0.0.0.0/0");
        assert_eq!(all.len(), 1 << 32);
        assert_eq!(all.iter().nth(3), Some(ip("0.0.0.3")));
        assert!(pool("10.0.0.0/8").contains(ip("10.255.255.255")));
    }

    #[test]
    fn bad_parts_are_named() {
        let err = |s: &str| s.parse::<Pool>().unwrap_err().to_string();
        assert_eq!(
            err("10.0.0.1-10.0.0.5,x"),
            "--load-balancer-ip-range: \"x\" is not an IPv4 range (A-B) or CIDR"
        );
        assert_eq!(
            err("fd00::/64"),
            "--load-balancer-ip-range: \"fd00::/64\" is not an IPv4 range (A-B) or CIDR"
        );
        assert!(err("10.0.0.0/33").contains("\"10.0.0.0/33\""));
        assert!(err("10.0.0.1,").contains("\"\" is not"));
        assert_eq!(
            err("10.0.0.9-10.0.0.1"),
            "--load-balancer-ip-range: \"10.0.0.9-10.0.0.1\" ends before it starts; write the lower address first"
        );
    }

    #[test]
    fn overlapping_parts_are_refused() {
        assert_eq!(
            "10.0.0.5-10.0.0.20,10.0.0.0/28".parse::<Pool>(),
            Err(PoolError::Overlap(
                "10.0.0.0/28".into(),
                "10.0.0.5-10.0.0.20".into()
            ))
        );
        assert!("10.0.0.1,10.0.0.1".parse::<Pool>().is_err());
        assert!("10.0.0.0/28,10.0.0.16".parse::<Pool>().is_ok(), "adjacent");
    }
}
