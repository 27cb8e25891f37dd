//! `[]byte` as Go's encoding/json carries it (Secret `data`, ConfigMap `binaryData`): standard
//! base64 with padding. Decoding is as lenient as Go's `StdEncoding`: non-zero trailing bits pass.

use ::base64::alphabet::STANDARD;
use ::base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use ::base64::Engine;

const GO_STD: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

pub fn encode(data: &[u8]) -> String {
    GO_STD.encode(data)
}

/// The bytes `text` encodes; None when it is not standard padded base64.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    GO_STD.decode(text).ok()
}

pub fn is_valid(text: &str) -> bool {
    decode(text).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_test_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(input.as_bytes()), want, "input {input:?}");
            assert_eq!(decode(want).as_deref(), Some(input.as_bytes()));
        }
        assert_eq!(encode(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn validity_like_go_std_encoding() {
        assert!(is_valid("Zm8=") && is_valid("") && is_valid("Zm9v"));
        // Go's StdEncoding ignores set bits after the last full byte.
        assert!(is_valid("Zm9="));
        assert!(!is_valid("Zm8") && !is_valid("Zm!v") && !is_valid("Z===") && !is_valid("Zm=v"));
    }
}
