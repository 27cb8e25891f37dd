//! Ages as kubectl shows them (upstream duration.HumanDuration).

use chrono::{DateTime, Utc};

/// The age of an RFC3339 timestamp at `now`: "5s", "3m2s", "10m", "5h3m", "2d3h", "45d", "2y10d".
pub fn human_age(created: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(created) {
        Ok(t) => human_duration((now - t.with_timezone(&Utc)).num_seconds()),
        Err(_) => "<unknown>".to_string(),
    }
}

/// Like upstream's translateTimestampSince: "<unknown>" for an unset time.
pub(crate) fn since(created: &str, now: DateTime<Utc>) -> String {
    human_age(created, now)
}

pub(crate) fn human_duration(seconds: i64) -> String {
    // Up to a second in the future counts as now, to tolerate clock skew between machines.
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    let years = hours / 24 / 365;
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_like_upstream() {
        let m = 60;
        let h = 60 * m;
        let d = 24 * h;
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (5, "5s"),
            (119, "119s"),
            (3 * m + 2, "3m2s"),
            (4 * m, "4m"),
            (10 * m + 5, "10m"),
            (179 * m, "179m"),
            (5 * h + 3 * m, "5h3m"),
            (7 * h, "7h"),
            (47 * h, "47h"),
            (2 * d + 3 * h, "2d3h"),
            (3 * d, "3d"),
            (45 * d, "45d"),
            (729 * d, "729d"),
            (2 * 365 * d + 10 * d, "2y10d"),
            (3 * 365 * d, "3y"),
            (9 * 365 * d, "9y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn parses_rfc3339() {
        let now = "2026-12-02T10:00:00Z".parse().unwrap();
        assert_eq!(human_age("2026-12-02T09:57:00Z", now), "3m");
        assert_eq!(human_age("2026-12-02T09:59:59.5+00:00", now), "0s");
        assert_eq!(human_age("", now), "<unknown>");
        assert_eq!(human_age("yesterday", now), "<unknown>");
    }
}
