//! meta/v1.Time and MicroTime as Go marshals them to JSON.

use chrono::{DateTime, SecondsFormat};

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
