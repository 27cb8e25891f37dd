//! The short, stable hash controllers put in the names and labels they make (a Deployment's
//! pod-template-hash, an EndpointSlice's port-set suffix): 32-bit FNV-1a, the same on every run
//! and every machine, unlike std's randomly keyed hasher.

pub fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c9dc5;
    for b in bytes {
        h ^= *b as u32;
        h = h.wrapping_mul(0x01000193);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert_eq!(super::fnv1a(b""), 0x811c9dc5);
        assert_eq!(super::fnv1a(b"a"), 0xe40c292c);
    }
}
