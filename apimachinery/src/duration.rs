//! Go's duration strings (`time.ParseDuration`), as upstream's components take them in flags
//! (`--node-monitor-grace-period=40s`, `--cluster-signing-duration=8760h`): a sequence of
//! numbers with units ns, us (or µs), ms, s, m, h, e.g. `1h30m`, `1.5s`, `0`. No sign.

use std::time::Duration;

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("invalid duration {0:?}: expected a number and unit such as 500ms, 40s, 5m or 8760h")]
pub struct DurationError(pub String);

const UNITS: [(&str, f64); 7] = [
    ("ns", 1e-9),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
];

/// Parses `s`; at most i64::MAX nanoseconds (about 292 years), as Go, so no deadline overflows.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError(s.to_string());
    match s {
        "0" => return Ok(Duration::ZERO),
        "" => return Err(bad()),
        _ => {}
    }
    let mut rest = s;
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let n: f64 = number.parse().map_err(|_| bad())?;
        let (unit, scale) = UNITS
            .iter()
            // Longest first: "ms" before "m".
            .filter(|(u, _)| tail.starts_with(u))
            .max_by_key(|(u, _)| u.len())
            .ok_or_else(bad)?;
        seconds += n * scale;
        rest = tail.strip_prefix(unit).ok_or_else(bad)?;
    }
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| d.as_nanos() <= i64::MAX as u128)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("40s"), Ok(Duration::from_secs(40)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("8760h"),
            Ok(Duration::from_secs(8760 * 3600))
        );
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
    }

    #[test]
    fn bad_durations_name_the_input() {
        for bad in ["", "10", "1d", "s", "-1s", "2562048h", "1..5s"] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(e.0, bad);
        }
        assert!(parse_duration("x")
            .unwrap_err()
            .to_string()
            .contains("such as 500ms"));
    }
}
