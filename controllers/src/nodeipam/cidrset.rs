//! The cluster CIDR cut into equal blocks of the node mask size, numbered from 0, as upstream's
//! cidrset: block `i` is the cluster network plus `i` times the block size. Pure arithmetic.

use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

/// Upstream's limit: at most 2^16 node blocks, so the set of used ones stays small.
const MAX_MASK_DIFF: u8 = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CidrSetError {
    #[error("--node-cidr-mask-size {mask} must be between the --cluster-cidr prefix length {prefix} and {bits}")]
    MaskOutsideCluster { mask: u8, prefix: u8, bits: u8 },
    #[error("--node-cidr-mask-size {mask} is more than {MAX_MASK_DIFF} bits longer than the --cluster-cidr prefix length {prefix}: at most 65536 node CIDRs are supported")]
    TooManyBlocks { mask: u8, prefix: u8 },
}

/// The blocks of a cluster CIDR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrSet {
    cluster: IpNetwork,
    node_prefix: u8,
}

fn bits(v6: bool) -> u8 {
    if v6 {
        128
    } else {
        32
    }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl CidrSet {
    pub fn new(cluster: IpNetwork, node_prefix: u8) -> Result<CidrSet, CidrSetError> {
        let (prefix, bits) = (cluster.prefix(), bits(cluster.is_ipv6()));
        if node_prefix < prefix || node_prefix > bits {
            return Err(CidrSetError::MaskOutsideCluster {
                mask: node_prefix,
                prefix,
                bits,
            });
        }
        if node_prefix - prefix > MAX_MASK_DIFF {
            return Err(CidrSetError::TooManyBlocks {
                mask: node_prefix,
                prefix,
            });
        }
        // Host bits in the flag are ignored, as Go's net.ParseCIDR does.
        let cluster = IpNetwork::new(cluster.network(), prefix).unwrap_or(cluster);
        Ok(CidrSet {
            cluster,
            node_prefix,
        })
    }

    pub fn cluster(&self) -> IpNetwork {
        self.cluster
    }

    /// How many node blocks the cluster CIDR holds.
    pub fn len(&self) -> u32 {
        1u32 << (self.node_prefix - self.cluster.prefix())
    }

    /// Never true: a CIDR set holds at least one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// log2 of the number of addresses in one block.
    fn block_shift(&self) -> u32 {
        u32::from(bits(self.cluster.is_ipv6()) - self.node_prefix)
    }

    /// Block `index` (taken modulo the number of blocks).
    pub fn block(&self, index: u32) -> IpNetwork {
        let index = u128::from(index % self.len());
        let addr = to_u128(self.cluster.network()) + (index << self.block_shift());
        let ip = if self.cluster.is_ipv6() {
            IpAddr::V6(Ipv6Addr::from(addr))
        } else {
            // Below 2^32: the cluster network is IPv4 and the offset stays inside it.
            IpAddr::V4(Ipv4Addr::from(u32::try_from(addr).unwrap_or(0)))
        };
        IpNetwork::new(ip, self.node_prefix).unwrap_or(self.cluster)
    }

    /// The blocks a CIDR overlaps, or None when it lies outside the cluster CIDR (or is of the
    /// other address family).
    pub fn covered(&self, cidr: IpNetwork) -> Option<RangeInclusive<u32>> {
        if cidr.is_ipv6() != self.cluster.is_ipv6() {
            return None;
        }
        let base = to_u128(self.cluster.network());
        let (start, end) = (to_u128(cidr.network()), to_u128(cidr.broadcast()));
        let cluster_end = to_u128(self.cluster.broadcast());
        if end < base || start > cluster_end {
            return None;
        }
        let shift = self.block_shift();
        let first = (start.max(base) - base) >> shift;
        let last = (end.min(cluster_end) - base) >> shift;
        Some(u32::try_from(first).ok()?..=u32::try_from(last).ok()?)
    }

    /// Whether `cidr` is exactly one of the blocks.
    pub fn is_block(&self, cidr: IpNetwork) -> bool {
        cidr.prefix() == self.node_prefix && cidr.ip() == cidr.network() && {
            self.covered(cidr).is_some()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNetwork {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_are_numbered_from_the_cluster_network() {
        let set = CidrSet::new(net("10.244.0.0/16"), 24).unwrap();
        assert_eq!(set.len(), 256);
        assert_eq!(set.block(0), net("10.244.0.0/24"));
        assert_eq!(set.block(7), net("10.244.7.0/24"));
        assert_eq!(set.block(255), net("10.244.255.0/24"));
        let v6 = CidrSet::new(net("fd00:10::/56"), 64).unwrap();
        assert_eq!(v6.block(3), net("fd00:10:0:3::/64"));
    }

    #[test]
    fn host_bits_in_the_cluster_cidr_are_ignored() {
        let set = CidrSet::new(net("10.244.3.7/16"), 24).unwrap();
        assert_eq!(set.cluster(), net("10.244.0.0/16"));
        assert_eq!(set.block(1), net("10.244.1.0/24"));
    }

    #[test]
    fn covered_blocks_of_smaller_larger_and_outside_cidrs() {
        let set = CidrSet::new(net("10.244.0.0/16"), 24).unwrap();
        assert_eq!(set.covered(net("10.244.5.0/24")), Some(5..=5));
        assert_eq!(set.covered(net("10.244.5.128/25")), Some(5..=5));
        assert_eq!(set.covered(net("10.244.4.0/23")), Some(4..=5));
        assert_eq!(set.covered(net("10.0.0.0/8")), Some(0..=255));
        assert_eq!(set.covered(net("10.245.0.0/24")), None);
        assert_eq!(set.covered(net("fd00::/64")), None);
        assert!(set.is_block(net("10.244.9.0/24")));
        assert!(!set.is_block(net("10.244.9.0/25")));
        assert!(!set.is_block(net("10.245.9.0/24")));
    }

    #[test]
    fn mask_sizes_outside_the_cluster_or_too_fine_are_refused() {
        let e = CidrSet::new(net("10.244.0.0/16"), 8).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--node-cidr-mask-size 8 must be between the --cluster-cidr prefix length 16 and 32"
        );
        assert!(CidrSet::new(net("10.244.0.0/16"), 33).is_err());
        assert_eq!(
            CidrSet::new(net("10.0.0.0/8"), 28).unwrap_err(),
            CidrSetError::TooManyBlocks {
                mask: 28,
                prefix: 8
            }
        );
        assert_eq!(CidrSet::new(net("10.244.0.0/24"), 24).unwrap().len(), 1);
    }
}
