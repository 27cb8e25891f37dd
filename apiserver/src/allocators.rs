//! The ClusterIP and NodePort pools. Allocations live in the Service objects themselves; the
//! in-memory sets are rebuilt from the stored Services at start, so they survive restarts, and
//! a mutex makes concurrent creates see each other's reservations.

use ipnetwork::Ipv4Network;
use rand::Rng;
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AllocError {
    #[error("provided IP {0} is not in the valid range. The range of valid IPs is {1}")]
    IpOutOfRange(Ipv4Addr, Ipv4Network),
    #[error("provided IP {0} is already allocated")]
    IpTaken(Ipv4Addr),
    #[error("no IP addresses left in the service range {0}")]
    IpExhausted(Ipv4Network),
    #[error("provided port {0} is not in the valid range. The range of valid ports is {1}-{2}")]
    PortOutOfRange(i64, u16, u16),
    #[error("provided port {0} is already allocated")]
    PortTaken(u16),
    #[error("no node ports left in the range {0}-{1}")]
    PortsExhausted(u16, u16),
}

pub struct Allocators {
    net: Ipv4Network,
    ports: RangeInclusive<u16>,
    ips_used: Mutex<HashSet<u32>>,
    ports_used: Mutex<HashSet<u16>>,
}

impl Allocators {
    pub fn new(net: Ipv4Network, ports: RangeInclusive<u16>) -> Allocators {
        Allocators {
            net,
            ports,
            ips_used: Mutex::new(HashSet::new()),
            ports_used: Mutex::new(HashSet::new()),
        }
    }

    pub fn range(&self) -> Ipv4Network {
        self.net
    }

    fn first_last(&self) -> (u32, u32) {
        // The network address and broadcast are never handed out.
        let first = u32::from(self.net.network()) + 1;
        let last = u32::from(self.net.broadcast()).saturating_sub(1);
        (first, last.max(first))
    }

    /// Reserves `want`, or a random free address when None.
    pub fn allocate_ip(&self, want: Option<Ipv4Addr>) -> Result<Ipv4Addr, AllocError> {
        let mut used = self.ips_used.lock().unwrap_or_else(|p| p.into_inner());
        let (first, last) = self.first_last();
        if let Some(ip) = want {
            let n = u32::from(ip);
            if !self.net.contains(ip) || n < first || n > last {
                return Err(AllocError::IpOutOfRange(ip, self.net));
            }
            if !used.insert(n) {
                return Err(AllocError::IpTaken(ip));
            }
            return Ok(ip);
        }
        let size = last - first + 1;
        let start = rand::rng().random_range(0..size);
        for i in 0..size {
            let n = first + (start + i) % size;
            if used.insert(n) {
                return Ok(Ipv4Addr::from(n));
            }
        }
        Err(AllocError::IpExhausted(self.net))
    }

    pub fn release_ip(&self, ip: Ipv4Addr) {
        let mut used = self.ips_used.lock().unwrap_or_else(|p| p.into_inner());
        used.remove(&u32::from(ip));
    }

    pub fn allocate_port(&self, want: Option<i64>) -> Result<u16, AllocError> {
        let (lo, hi) = (*self.ports.start(), *self.ports.end());
        let mut used = self.ports_used.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = want {
            if p < lo as i64 || p > hi as i64 {
                return Err(AllocError::PortOutOfRange(p, lo, hi));
            }
            let p = p as u16;
            if !used.insert(p) {
                return Err(AllocError::PortTaken(p));
            }
            return Ok(p);
        }
        let size = (hi - lo) as u32 + 1;
        let start = rand::rng().random_range(0..size);
        for i in 0..size {
            let p = lo + ((start + i) % size) as u16;
            if used.insert(p) {
                return Ok(p);
            }
        }
        Err(AllocError::PortsExhausted(lo, hi))
    }

    pub fn release_port(&self, p: u16) {
        let mut used = self.ports_used.lock().unwrap_or_else(|p| p.into_inner());
        used.remove(&p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Allocators {
        Allocators::new("10.96.0.0/30".parse().unwrap(), 30000..=30001)
    }

    #[test]
    fn hands_out_each_ip_once_and_never_network_or_broadcast() {
        let a = small();
        let mut got = vec![a.allocate_ip(None).unwrap(), a.allocate_ip(None).unwrap()];
        got.sort();
        assert_eq!(
            got,
            vec![Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::new(10, 96, 0, 2)]
        );
        assert_eq!(a.allocate_ip(None), Err(AllocError::IpExhausted(a.range())));
        a.release_ip(got[0]);
        assert_eq!(a.allocate_ip(None).unwrap(), got[0]);
    }

    #[test]
    fn asked_for_ip_must_be_free_and_in_range() {
        let a = small();
        let ip = Ipv4Addr::new(10, 96, 0, 2);
        assert_eq!(a.allocate_ip(Some(ip)), Ok(ip));
        assert_eq!(a.allocate_ip(Some(ip)), Err(AllocError::IpTaken(ip)));
        let out = Ipv4Addr::new(10, 97, 0, 1);
        assert!(matches!(
            a.allocate_ip(Some(out)),
            Err(AllocError::IpOutOfRange(..))
        ));
        let bcast = Ipv4Addr::new(10, 96, 0, 3);
        assert!(matches!(
            a.allocate_ip(Some(bcast)),
            Err(AllocError::IpOutOfRange(..))
        ));
    }

    #[test]
    fn node_ports_in_range_once() {
        let a = small();
        assert_eq!(a.allocate_port(Some(30001)), Ok(30001));
        assert_eq!(
            a.allocate_port(Some(30001)),
            Err(AllocError::PortTaken(30001))
        );
        assert_eq!(a.allocate_port(None), Ok(30000));
        assert_eq!(
            a.allocate_port(None),
            Err(AllocError::PortsExhausted(30000, 30001))
        );
        assert!(matches!(
            a.allocate_port(Some(80)),
            Err(AllocError::PortOutOfRange(..))
        ));
    }
}
