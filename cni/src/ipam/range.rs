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

/// Wraps around at the end of the address space instead of overflowing on addresses near it.
pub fn offset(ip: IpAddr, by: i128) -> IpAddr {
    from_u128(to_u128(ip).wrapping_add_signed(by), ip)
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
        self.size()
            .saturating_sub(u128::from(self.contains(self.gateway)))
    }

    /// How many addresses lie from start to end, both included (saturating for an IPv6 /0).
    fn size(&self) -> u128 {
        (to_u128(self.end).saturating_sub(to_u128(self.start))).saturating_add(1)
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
) -> impl Iterator<Item = (&Range, IpAddr)> + '_ {
    // The address after `ip` in range `i`, moving on to the next range after its end.
    let after = move |i: usize, ip: IpAddr| -> Option<(usize, IpAddr)> {
        if ip != set.get(i)?.end {
            return Some((i, offset(ip, 1)));
        }
        let j = (i + 1) % set.len();
        Some((j, set.get(j)?.start))
    };
    let begin = last
        .and_then(|l| set.iter().position(|r| r.contains(l)).map(|i| (i, l)))
        .and_then(|(i, l)| after(i, l))
        .or_else(|| set.first().map(|r| (0, r.start)));
    let mut cur = begin;
    let mut left = set.iter().map(Range::size).fold(0, u128::saturating_add);
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        left -= 1;
        let (i, ip) = cur?;
        cur = after(i, ip);
        Some((set.get(i)?, ip))
    })
    .filter(|(range, ip)| *ip != range.gateway)
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
    fn offset_crosses_the_middle_and_the_end_of_the_ipv6_space() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let middle = ip("7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_eq!(offset(middle, 1), ip("8000::"));
        assert_eq!(
            offset(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 1),
            ip("::")
        );
        assert_eq!(offset(ip("0.0.0.0"), -1), ip("255.255.255.255"));
    }

    #[test]
    fn whole_ipv6_space_saturates_instead_of_overflowing() {
        let all = r("::/0");
        assert_eq!(all.capacity(), u128::MAX - 1);
        let set = vec![all.clone(), all];
        let first: Vec<String> = candidates(&set, None)
            .take(2)
            .map(|(_, ip)| ip.to_string())
            .collect();
        assert_eq!(first, ["::2", "::3"]);
        assert_eq!(candidates(&[], None).count(), 0);
    }

    #[test]
    fn ipv6_range() {
        let range = r("fd00:1::/120");
        assert_eq!(range.start.to_string(), "fd00:1::1");
        assert_eq!(range.end.to_string(), "fd00:1::ff");
        assert_eq!(range.capacity(), 254);
    }
}
