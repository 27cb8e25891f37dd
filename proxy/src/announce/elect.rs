//! Which node announces each LoadBalancer address (MetalLB's layer-2 election, without
//! memberlist): every speaker computes the same answer from the same inputs, so no node has to
//! tell another what it decided.
//!
//! A speaker is alive while its Lease keeps being renewed. Liveness is judged, as upstream's
//! leader election does, by how long this process has seen a Lease unchanged on its own clock:
//! the clocks of different machines are never compared.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::cidr::Ipv4Cidr;

/// A node's speaker as its Lease describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speaker {
    pub node: String,
    /// The networks of the interface it announces on: it takes part in the election of the
    /// addresses inside them only (a node on another segment could not be reached by ARP).
    pub networks: Vec<Ipv4Cidr>,
    /// spec.renewTime as written; a change is a renewal.
    pub renewed: String,
    pub duration: Duration,
}

/// One address to announce, with the Service it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub ip: Ipv4Addr,
    /// "namespace/name".
    pub service: String,
    /// externalTrafficPolicy Local: only the nodes with a ready endpoint of the Service may
    /// announce it (traffic arriving elsewhere would be dropped). `None`: every node may.
    pub local_nodes: Option<BTreeSet<String>>,
}

/// The speakers this process has seen, each with when it last saw its Lease change.
#[derive(Default)]
pub struct Liveness {
    seen: BTreeMap<String, (String, Instant)>,
}

impl Liveness {
    /// Records the Leases as read at `now`; returns the speakers still alive.
    pub fn alive<'a>(&mut self, speakers: &'a [Speaker], now: Instant) -> Vec<&'a Speaker> {
        self.seen
            .retain(|node, _| speakers.iter().any(|s| &s.node == node));
        speakers
            .iter()
            .filter(|s| {
                let entry = self
                    .seen
                    .entry(s.node.clone())
                    .or_insert_with(|| (s.renewed.clone(), now));
                if entry.0 != s.renewed {
                    *entry = (s.renewed.clone(), now);
                }
                now.saturating_duration_since(entry.1) < s.duration
            })
            .collect()
    }
}

/// The node that announces `address` among the `alive` speakers: of those whose networks hold
/// it (and, for externalTrafficPolicy Local, that run an endpoint), the one whose hash of
/// (node, address) is lowest. Each address lands on its own node, so several Services spread
/// over the segment; a node leaving moves only the addresses it held.
pub fn winner<'a>(address: &Address, alive: &[&'a Speaker]) -> Option<&'a str> {
    alive
        .iter()
        .filter(|s| s.networks.iter().any(|n| n.contains(address.ip)))
        .filter(|s| {
            address
                .local_nodes
                .as_ref()
                .is_none_or(|nodes| nodes.contains(&s.node))
        })
        .min_by_key(|s| rank(&s.node, address.ip))
        .map(|s| s.node.as_str())
}

fn rank(node: &str, ip: Ipv4Addr) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{node}#{ip}").as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speaker(node: &str, net: &str) -> Speaker {
        Speaker {
            node: node.into(),
            networks: vec![net.parse().unwrap()],
            renewed: "t0".into(),
            duration: Duration::from_secs(6),
        }
    }

    fn address(ip: &str, local: Option<&[&str]>) -> Address {
        Address {
            ip: ip.parse().unwrap(),
            service: "default/web".into(),
            local_nodes: local.map(|l| l.iter().map(|n| n.to_string()).collect()),
        }
    }

    #[test]
    fn every_speaker_agrees_and_only_the_winners_departure_moves_an_address() {
        let all = [
            speaker("a", "172.30.0.0/24"),
            speaker("b", "172.30.0.0/24"),
            speaker("c", "172.30.0.0/24"),
        ];
        let refs: Vec<&Speaker> = all.iter().collect();
        let mut reversed = refs.clone();
        reversed.reverse();
        let ips: Vec<Address> = (200..216)
            .map(|i| address(&format!("172.30.0.{i}"), None))
            .collect();
        let first: Vec<&str> = ips.iter().map(|a| winner(a, &refs).unwrap()).collect();
        let again: Vec<&str> = ips.iter().map(|a| winner(a, &reversed).unwrap()).collect();
        assert_eq!(
            first, again,
            "the order speakers are listed in decides nothing"
        );
        let holders: BTreeSet<&str> = first.iter().copied().collect();
        assert!(holders.len() > 1, "16 addresses all on one node: {first:?}");
        // The holder of the first address goes: only its addresses move.
        let gone = first[0];
        let left: Vec<&Speaker> = refs.iter().copied().filter(|s| s.node != gone).collect();
        for (a, before) in ips.iter().zip(&first) {
            let after = winner(a, &left).unwrap();
            if *before == gone {
                assert_ne!(after, gone);
            } else {
                assert_eq!(after, *before, "{} moved though its node stayed", a.ip);
            }
        }
    }

    #[test]
    fn only_speakers_on_the_addresses_segment_and_with_a_local_endpoint_take_part() {
        let all = [speaker("a", "172.30.0.0/24"), speaker("c", "172.30.1.0/24")];
        let refs: Vec<&Speaker> = all.iter().collect();
        assert_eq!(winner(&address("172.30.1.9", None), &refs), Some("c"));
        assert_eq!(winner(&address("172.30.0.9", None), &refs), Some("a"));
        assert_eq!(winner(&address("10.0.0.1", None), &refs), None);
        let on_c = address("172.30.0.9", Some(&["c"]));
        assert_eq!(
            winner(&on_c, &refs),
            None,
            "c is not on the segment, a has no endpoint"
        );
        let both = [speaker("a", "172.30.0.0/24"), speaker("b", "172.30.0.0/24")];
        let refs: Vec<&Speaker> = both.iter().collect();
        assert_eq!(
            winner(&address("172.30.0.9", Some(&["b"])), &refs),
            Some("b")
        );
    }

    #[test]
    fn a_speaker_is_alive_while_its_lease_changes_within_its_duration() {
        let t0 = Instant::now();
        let mut live = Liveness::default();
        let mut a = speaker("a", "172.30.0.0/24");
        let b = speaker("b", "172.30.0.0/24");
        let names = |v: Vec<&Speaker>| v.iter().map(|s| s.node.clone()).collect::<Vec<_>>();
        let both = [a.clone(), b.clone()];
        assert_eq!(names(live.alive(&both, t0)), ["a", "b"]);
        a.renewed = "t5".into();
        let later = [a.clone(), b.clone()];
        let t5 = t0 + Duration::from_secs(5);
        assert_eq!(names(live.alive(&later, t5)), ["a", "b"]);
        // b's lease has not changed for 7 s (its duration is 6): gone; a renewed at 5 s.
        let t7 = t0 + Duration::from_secs(7);
        assert_eq!(names(live.alive(&later, t7)), ["a"]);
        // A Lease deleted and made again starts over.
        assert_eq!(names(live.alive(&[a.clone()], t7)), ["a"]);
        assert_eq!(names(live.alive(&later, t7)), ["a", "b"]);
    }
}
