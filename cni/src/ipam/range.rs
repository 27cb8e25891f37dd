//! One address range (host-local's "range"): subnet, first and last address to hand out, gateway.
//! Pure arithmetic on addresses as u128, the same for IPv4 and IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::IpNetwork;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The subnet with host bits cleared.
    pub subnet: IpNetwork,
    pub start: IpAddr,
    pub end: IpAddr,
    pub gateway: IpAddr,
}

pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Converts back in the family of `like`.
pub fn from_u128(n: u128, like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(n as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

pub fn offset(ip: IpAddr, by: i128) -> IpAddr {
    from_u128((to_u128(ip) as i128 + by) as u128, ip)
}

/// Why a range from the configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("invalid subnet {subnet}: {reason}")]
    InvalidSubnet { subnet: IpNetwork, reason: String },
    #[error("subnet {subnet} is too small to allocate from (at most /{max_prefix})")]
    TooSmall { subnet: IpNetwork, max_prefix: u8 },
    #[error("{field} {ip} is not a host address of subnet {subnet}")]
    NotAHost {
        field: &'static str,
        ip: IpAddr,
        subnet: IpNetwork,
    },
    #[error("gateway {gateway} is not in the family of subnet {subnet}")]
    GatewayFamily { gateway: IpAddr, subnet: IpNetwork },
    #[error("rangeStart {start} is after rangeEnd {end} in {subnet}")]
    StartAfterEnd {
        start: IpAddr,
        end: IpAddr,
        subnet: IpNetwork,
    },
}

impl Range {
    /// Builds a range with host-local's defaults: start after the network address, end before
    /// the broadcast address (IPv4) or at the last address (IPv6), gateway = first address.
    pub fn new(
        subnet: IpNetwork,
        start: Option<IpAddr>,
        end: Option<IpAddr>,
        gateway: Option<IpAddr>,
    ) -> Result<Range, RangeError> {
        let subnet = IpNetwork::new(subnet.network(), subnet.prefix()).map_err(|e| {
            RangeError::InvalidSubnet {
                subnet,
                reason: e.to_string(),
            }
        })?;
        let network = subnet.network();
        let last = last_address(subnet);
        let min_hosts_prefix = if subnet.is_ipv4() { 30 } else { 126 };
        if subnet.prefix() > min_hosts_prefix {
            return Err(RangeError::TooSmall {
                subnet,
                max_prefix: min_hosts_prefix,
            });
        }
        let first_host = offset(network, 1);
        let last_host = if subnet.is_ipv4() {
            offset(last, -1)
        } else {
            last
        };
        let start = start.unwrap_or(first_host);
        let end = end.unwrap_or(last_host);
        let gateway = gateway.unwrap_or(first_host);
        for (field, ip) in [("rangeStart", start), ("rangeEnd", end)] {
            if !subnet.contains(ip) || ip == network || (subnet.is_ipv4() && ip == last) {
                return Err(RangeError::NotAHost { field, ip, subnet });
            }
        }
        if gateway.is_ipv4() != subnet.is_ipv4() {
            return Err(RangeError::GatewayFamily { gateway, subnet });
        }
        if to_u128(start) > to_u128(end) {
            return Err(RangeError::StartAfterEnd { start, end, subnet });
        }
        Ok(Range {
            subnet,
            start,
            end,
            gateway,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.start.is_ipv4()
            && to_u128(ip) >= to_u128(self.start)
            && to_u128(ip) <= to_u128(self.end)
    }

    /// How many addresses the allocator may hand out (the gateway excluded when inside).
    pub fn capacity(&self) -> u128 {
        let n = to_u128(self.end) - to_u128(self.start) + 1;
        n - u128::from(self.contains(self.gateway))
    }

    /// The address with this range's prefix length, as put on an interface.
    pub fn with_prefix(&self, ip: IpAddr) -> IpNetwork {
        // Prefix came from a valid IpNetwork of the same family, so this cannot fail.
        IpNetwork::new(ip, self.subnet.prefix()).unwrap_or(self.subnet)
    }
}

fn last_address(subnet: IpNetwork) -> IpAddr {
    match subnet {
        IpNetwork::V4(n) => IpAddr::V4(n.broadcast()),
        IpNetwork::V6(n) => {
            let host_bits = 128 - u32::from(n.prefix());
            let mask = if host_bits == 128 {
                u128::MAX
            } else {
                (1u128 << host_bits) - 1
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(n.network()) | mask))
        }
    }
}

/// Walks a range set round-robin: from the address after `last` (when it is in the set),
/// otherwise from the first range's start, through every address once.
pub fn candidates(
    set: &[Range],
    last: Option<IpAddr>,
) -> impl Iterator<Item = (usize, IpAddr)> + '_ {
    let begin = last
        .and_then(|l| set.iter().position(|r| r.contains(l)).map(|i| (i, l)))
        .map(|(i, l)| {
            if l == set[i].end {
                ((i + 1) % set.len(), set[(i + 1) % set.len()].start)
            } else {
                (i, offset(l, 1))
            }
        })
        .unwrap_or((0, set[0].start));
    let total: u128 = set
        .iter()
        .map(|r| to_u128(r.end) - to_u128(r.start) + 1)
        .sum();
    let mut cur = Some(begin);
    let mut left = total;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        left -= 1;
        let (i, ip) = cur?;
        cur = Some(if ip == set[i].end {
            let j = (i + 1) % set.len();
            (j, set[j].start)
        } else {
            (i, offset(ip, 1))
        });
        Some((i, ip))
    })
    .filter(move |(i, ip)| *ip != set[*i].gateway)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Range {
        Range::new(s.parse().unwrap(), None, None, None).unwrap()
    }

    #[test]
    fn defaults_like_host_local() {
        let range = r("10.1.0.0/29");
        assert_eq!(range.start, "10.1.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(range.end, "10.1.0.6".parse::<IpAddr>().unwrap());
        assert_eq!(range.gateway, "10.1.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(range.capacity(), 5);
    }

    #[test]
    fn host_bits_in_subnet_are_cleared() {
        assert_eq!(r("10.1.0.7/24").subnet.to_string(), "10.1.0.0/24");
    }

    #[test]
    fn too_small_and_out_of_subnet_rejected() {
        assert!(Range::new("10.0.0.0/31".parse().unwrap(), None, None, None).is_err());
        let e = Range::new(
            "10.0.0.0/24".parse().unwrap(),
            Some("10.0.1.5".parse().unwrap()),
            None,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("rangeStart"), "{e}");
        let e = Range::new(
            "10.0.0.0/24".parse().unwrap(),
            Some("10.0.0.9".parse().unwrap()),
            Some("10.0.0.3".parse().unwrap()),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("after"), "{e}");
    }

    #[test]
    fn candidates_skip_gateway_and_wrap_after_last() {
        let set = vec![r("10.1.0.0/29")];
        let all: Vec<String> = candidates(&set, None)
            .map(|(_, ip)| ip.to_string())
            .collect();
        assert_eq!(
            all,
            ["10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6"]
        );
        let after: Vec<String> = candidates(&set, Some("10.1.0.4".parse().unwrap()))
            .map(|(_, ip)| ip.to_string())
            .collect();
        assert_eq!(
            after,
            ["10.1.0.5", "10.1.0.6", "10.1.0.2", "10.1.0.3", "10.1.0.4"]
        );
    }

    #[test]
    fn candidates_cross_ranges_in_a_set() {
        let set = vec![
            Range::new(
                "10.1.0.0/24".parse().unwrap(),
                Some("10.1.0.10".parse().unwrap()),
                Some("10.1.0.11".parse().unwrap()),
                None,
            )
            .unwrap(),
            Range::new(
                "10.2.0.0/24".parse().unwrap(),
                Some("10.2.0.20".parse().unwrap()),
                Some("10.2.0.21".parse().unwrap()),
                None,
            )
            .unwrap(),
        ];
        let got: Vec<String> = candidates(&set, Some("10.1.0.11".parse().unwrap()))
            .map(|(_, ip)| ip.to_string())
            .collect();
        assert_eq!(got, ["10.2.0.20", "10.2.0.21", "10.1.0.10", "10.1.0.11"]);
    }

    #[test]
    fn ipv6_range() {
        let range = r("fd00:1::/120");
        assert_eq!(range.start.to_string(), "fd00:1::1");
        assert_eq!(range.end.to_string(), "fd00:1::ff");
        assert_eq!(range.capacity(), 254);
    }
}
