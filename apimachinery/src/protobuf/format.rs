//! JSON renderings Go uses for a few protobuf types: base64 bytes and RFC 3339 times.

use chrono::{DateTime, SecondsFormat};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64 (RFC 4648 section 4), what Go's encoding/json writes for `[]byte`.
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// meta/v1.Time or MicroTime as Go marshals it: UTC, `Z`, whole seconds or microseconds.
/// None when the instant is outside what RFC 3339 can express.
pub fn rfc3339(seconds: i64, nanos: i32, micros: bool) -> Option<String> {
    let nanos = u32::try_from(nanos).ok()?;
    let at = DateTime::from_timestamp(seconds, nanos)?;
    let precision = if micros {
        SecondsFormat::Micros
    } else {
        SecondsFormat::Secs
    };
    Some(at.to_rfc3339_opts(precision, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_test_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want, "input {input:?}");
        }
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn times_render_like_go() {
        assert_eq!(
            rfc3339(1_700_000_000, 123_456_789, false).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(
            rfc3339(1_700_000_000, 123_456_789, true).as_deref(),
            Some("2023-11-14T22:13:20.123456Z")
        );
        assert_eq!(rfc3339(0, -1, false), None);
    }
}
