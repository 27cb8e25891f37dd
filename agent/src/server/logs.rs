//! Container logs as the kubelet serves them for `pods/log`: CRI log files
//! (`<ts> <stream> <P|F> <text>`) read from the pod's log directory, with tailLines, timestamps,
//! previous, limitBytes and follow.

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub tail_lines: Option<usize>,
    pub timestamps: bool,
    pub previous: bool,
    pub limit_bytes: Option<usize>,
    /// Only lines written at or after this time (sinceSeconds / sinceTime).
    pub since: Option<k8s_openapi::jiff::Timestamp>,
}

/// One CRI log record.
#[derive(Debug, PartialEq)]
pub struct Record<'a> {
    pub timestamp: &'a str,
    pub stream: &'a str,
    pub partial: bool,
    pub text: &'a str,
}

pub fn parse_line(line: &str) -> Option<Record<'_>> {
    let mut parts = line.splitn(4, ' ');
    let timestamp = parts.next()?;
    let stream = parts.next()?;
    let tag = parts.next()?;
    let text = parts.next().unwrap_or("");
    Some(Record {
        timestamp,
        stream,
        partial: tag.split(':').next() == Some("P"),
        text,
    })
}

/// Renders CRI log lines to what `kubectl logs` shows.
pub fn render(lines: &[&str], timestamps: bool) -> String {
    let mut out = String::new();
    let mut continuing = false;
    for line in lines {
        let Some(r) = parse_line(line) else { continue };
        if timestamps && !continuing {
            out.push_str(r.timestamp);
            out.push(' ');
        }
        out.push_str(r.text);
        if !r.partial {
            out.push('\n');
        }
        continuing = r.partial;
    }
    out
}

/// The lines written at or after `cutoff` (lines without a readable time are kept).
pub fn since<'a>(lines: &[&'a str], cutoff: k8s_openapi::jiff::Timestamp) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|l| {
            parse_line(l)
                .and_then(|r| r.timestamp.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .is_none_or(|t| t >= cutoff)
        })
        .copied()
        .collect()
}

/// The last `n` logical lines (a partial record belongs to the line it continues).
pub fn tail<'a>(lines: &[&'a str], n: usize) -> Vec<&'a str> {
    let mut kept = Vec::new();
    let mut complete = 0;
    for line in lines.iter().rev() {
        let partial = parse_line(line).is_some_and(|r| r.partial);
        if !partial {
            if complete == n {
                break;
            }
            complete += 1;
        }
        kept.push(*line);
    }
    kept.reverse();
    kept
}

/// Cuts `text` to at most `max` bytes, at a character boundary: a byte limit from a request
/// (limitBytes) may fall inside a multi-byte character, where `String::truncate` would panic.
pub fn truncate_bytes(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let end = (0..=max)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    text.truncate(end);
}

/// The log file of the newest attempt of a container (or the one before, for `previous`).
pub fn log_file(pod_log_dir: &Path, container: &str, previous: bool) -> Option<PathBuf> {
    let dir = pod_log_dir.join(container);
    let mut attempts: Vec<u32> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".log"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    attempts.sort_unstable();
    let pick = if previous {
        attempts.iter().rev().nth(1)
    } else {
        attempts.last()
    };
    pick.map(|n| dir.join(format!("{n}.log")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: [&str; 4] = [
        "2026-12-02T10:00:00.1Z stdout F first",
        "2026-12-02T10:00:01.1Z stderr F second",
        "2026-12-02T10:00:02.1Z stdout P thi",
        "2026-12-02T10:00:02.2Z stdout F rd",
    ];

    #[test]
    fn renders_with_and_without_timestamps() {
        assert_eq!(render(&LINES, false), "first\nsecond\nthird\n");
        assert_eq!(
            render(&LINES, true),
            "2026-12-02T10:00:00.1Z first\n2026-12-02T10:00:01.1Z second\n2026-12-02T10:00:02.1Z third\n"
        );
    }

    #[test]
    fn since_keeps_lines_at_or_after_the_cutoff() {
        let cutoff: k8s_openapi::jiff::Timestamp = "2026-12-02T10:00:01Z".parse().unwrap();
        assert_eq!(render(&since(&LINES, cutoff), false), "second\nthird\n");
    }

    #[test]
    fn tail_counts_logical_lines() {
        assert_eq!(render(&tail(&LINES, 1), false), "third\n");
        assert_eq!(render(&tail(&LINES, 2), false), "second\nthird\n");
        assert_eq!(render(&tail(&LINES, 10), false), "first\nsecond\nthird\n");
        assert_eq!(render(&tail(&LINES, 0), false), "");
    }

    #[test]
    fn truncate_bytes_stops_before_a_split_character() {
        let mut text = "aé€\n".to_string();
        truncate_bytes(&mut text, 2);
        assert_eq!(text, "a");
        let mut text = "aé€\n".to_string();
        truncate_bytes(&mut text, 3);
        assert_eq!(text, "aé");
        let mut text = "aé€\n".to_string();
        truncate_bytes(&mut text, usize::MAX);
        assert_eq!(text, "aé€\n");
    }

    #[test]
    fn picks_newest_or_previous_attempt() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("app");
        std::fs::create_dir_all(&dir).unwrap();
        for n in [0, 1, 10] {
            std::fs::write(dir.join(format!("{n}.log")), "").unwrap();
        }
        assert_eq!(log_file(tmp.path(), "app", false), Some(dir.join("10.log")));
        assert_eq!(log_file(tmp.path(), "app", true), Some(dir.join("1.log")));
        assert_eq!(log_file(tmp.path(), "other", false), None);
    }
}
