//! Deterministic names derived from the attachment, so DEL and GC find what ADD created even
//! when ADD was killed before it could report anything.

use std::hash::Hasher;

use keelson_apimachinery::hash::Fnv1a64;

/// 64-bit FNV-1a of the parts, stable across versions and platforms (unlike std's hasher).
pub fn fnv1a(parts: &[&str]) -> u64 {
    let mut h = Fnv1a64::default();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // A byte no name contains, so ("ab","c") and ("a","bc") differ.
            h.write_u8(0xff);
        }
        h.write(part.as_bytes());
    }
    h.finish()
}

/// Host side of the veth pair: "veth" + 8 hex characters of hash(container ID, ifname).
pub fn host_veth(container_id: &str, ifname: &str) -> String {
    let h = fnv1a(&[container_id, ifname]);
    format!("veth{:08x}", (h ^ (h >> 32)) as u32)
}

/// True for names `host_veth` produces.
pub fn is_host_veth(name: &str) -> bool {
    name.strip_prefix("veth").is_some_and(|hex| {
        hex.len() == 8
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

pub const MASQ_CHAIN_PREFIX: &str = "KCNI-";

/// The attachment's own masquerade chain (iptables allows 28 characters).
pub fn masq_chain(network: &str, container_id: &str, ifname: &str) -> String {
    format!(
        "{MASQ_CHAIN_PREFIX}{:016x}",
        fnv1a(&[network, container_id, ifname])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_name_is_stable_and_distinct() {
        let a = host_veth("abc", "eth0");
        assert_eq!(a, host_veth("abc", "eth0"));
        assert_ne!(a, host_veth("abc", "eth1"));
        assert_ne!(a, host_veth("abd", "eth0"));
        assert!(is_host_veth(&a), "{a}");
        assert!(a.len() <= 15);
        assert!(!is_host_veth("veth0"));
    }

    #[test]
    fn separator_matters() {
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
    }

    #[test]
    fn names_stay_those_earlier_versions_made() {
        // DEL and GC after an upgrade find the veths the previous version created.
        assert_eq!(host_veth("abc", "eth0"), "veth5dff91b7");
    }

    #[test]
    fn chain_name_fits_iptables() {
        let c = masq_chain("net", "abc", "eth0");
        assert!(c.len() <= 28 && c.starts_with(MASQ_CHAIN_PREFIX));
    }
}
