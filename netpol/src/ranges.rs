//! ipBlock math: `cidr` minus its `except` blocks, and the union of several blocks, as disjoint
//! address ranges. An nftables interval set refuses overlapping elements, and with auto-merge it
//! could no longer delete one element of a merged range; disjoint ranges computed here keep every
//! element a set holds exactly the one an update adds or deletes.

use std::net::Ipv4Addr;

/// An inclusive IPv4 range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Range {
    pub first: u32,
    pub last: u32,
}

impl Range {
    /// As an nft interval element: `a.b.c.d` or `a.b.c.d-e.f.g.h`.
    pub fn element(&self) -> String {
        let (a, b) = (Ipv4Addr::from(self.first), Ipv4Addr::from(self.last));
        if self.first == self.last {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    }
}

/// Parses `a.b.c.d/n` (host bits may be set, as upstream accepts in except lists); the error
/// names the text.
pub fn parse_cidr(s: &str) -> Result<Range, String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not a CIDR (a.b.c.d/n)"))?;
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("{s:?}: {addr:?} is not an IPv4 address"))?;
    let len: u32 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("{s:?}: prefix length {len:?} is not 0-32"))?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    let first = u32::from(addr) & mask;
    Ok(Range {
        first,
        last: first | !mask,
    })
}

/// `block` without every range of `holes`.
pub fn subtract(block: Range, holes: &[Range]) -> Vec<Range> {
    let mut out = vec![block];
    for h in holes {
        out = out
            .into_iter()
            .flat_map(|r| {
                let mut left = Vec::new();
                if h.last < r.first || h.first > r.last {
                    left.push(r);
                    return left;
                }
                if h.first > r.first {
                    left.push(Range {
                        first: r.first,
                        last: h.first - 1,
                    });
                }
                if h.last < r.last {
                    left.push(Range {
                        first: h.last + 1,
                        last: r.last,
                    });
                }
                left
            })
            .collect();
    }
    out
}

/// The union of `ranges` as sorted, disjoint, non-adjacent ranges.
pub fn union(mut ranges: Vec<Range>) -> Vec<Range> {
    ranges.sort();
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(prev) if r.first <= prev.last.saturating_add(1) => {
                prev.last = prev.last.max(r.last);
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elements(rs: &[Range]) -> Vec<String> {
        rs.iter().map(Range::element).collect()
    }

    #[test]
    fn cidr_minus_excepts() {
        let block = parse_cidr("10.0.0.0/16").unwrap();
        let holes = [
            parse_cidr("10.0.1.0/24").unwrap(),
            parse_cidr("10.0.255.255/32").unwrap(),
        ];
        assert_eq!(
            elements(&subtract(block, &holes)),
            ["10.0.0.0-10.0.0.255", "10.0.2.0-10.0.255.254"]
        );
        // A hole covering everything leaves nothing; one at the start leaves the rest.
        assert!(subtract(block, &[parse_cidr("10.0.0.0/8").unwrap()]).is_empty());
        assert_eq!(
            elements(&subtract(block, &[parse_cidr("10.0.0.0/17").unwrap()])),
            ["10.0.128.0-10.0.255.255"]
        );
    }

    #[test]
    fn whole_space_and_host_bits() {
        let all = parse_cidr("0.0.0.0/0").unwrap();
        assert_eq!((all.first, all.last), (0, u32::MAX));
        assert_eq!(
            parse_cidr("10.1.2.3/24").unwrap().element(),
            "10.1.2.0-10.1.2.255"
        );
        assert_eq!(parse_cidr("10.1.2.3/32").unwrap().element(), "10.1.2.3");
        for bad in ["10.0.0.0", "10.0.0.0/33", "fd00::/8", "x/8"] {
            let e = parse_cidr(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn union_merges_overlapping_and_adjacent() {
        let rs = vec![
            parse_cidr("10.0.1.0/24").unwrap(),
            parse_cidr("10.0.0.0/24").unwrap(),
            parse_cidr("10.0.0.128/25").unwrap(),
            parse_cidr("10.0.3.0/24").unwrap(),
        ];
        assert_eq!(
            elements(&union(rs)),
            ["10.0.0.0-10.0.1.255", "10.0.3.0-10.0.3.255"]
        );
    }
}
