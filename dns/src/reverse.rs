//! Reverse names (RFC 1035 in-addr.arpa, RFC 3596 ip6.arpa) to addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The address a full reverse name stands for, or None (a partial or malformed name, or not a
/// reverse name at all). `name` is lowercase, without the trailing dot.
pub fn parse_reverse_name(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let octets: Vec<u8> = rest
            .rsplit('.')
            .map(|l| l.parse::<u8>().ok())
            .collect::<Option<_>>()?;
        let o: [u8; 4] = octets.try_into().ok()?;
        return Some(IpAddr::V4(Ipv4Addr::from(o)));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = rest
        .rsplit('.')
        .map(|l| match l.len() {
            1 => u8::from_str_radix(l, 16).ok(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (b, pair) in bytes.iter_mut().zip(nibbles.chunks(2)) {
        if let [hi, lo] = pair {
            *b = (hi << 4) | lo;
        }
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_and_ipv6_reverse_names() {
        assert_eq!(
            parse_reverse_name("10.0.96.10.in-addr.arpa"),
            Some("10.96.0.10".parse().unwrap())
        );
        let v6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa";
        assert_eq!(parse_reverse_name(v6), Some("2001:db8::1".parse().unwrap()));
        for bad in [
            "96.10.in-addr.arpa",
            "300.0.96.10.in-addr.arpa",
            "1.2.ip6.arpa",
            "web",
        ] {
            assert_eq!(parse_reverse_name(bad), None, "{bad}");
        }
    }
}
