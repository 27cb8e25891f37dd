//! The kubelet's restart back-off: the first restart is immediate, then 10 s doubling to 5 min.

use std::time::Duration;

pub const INITIAL: Duration = Duration::from_secs(10);
pub const MAX: Duration = Duration::from_secs(300);

/// Delay before starting attempt `restarts + 1` of a container that has restarted `restarts`
/// times (its latest attempt number).
pub fn restart_delay(restarts: u32) -> Duration {
    if restarts == 0 {
        return Duration::ZERO;
    }
    let factor = 1u64.checked_shl(restarts - 1).unwrap_or(u64::MAX);
    INITIAL
        .checked_mul(u32::try_from(factor).unwrap_or(u32::MAX))
        .map_or(MAX, |d| d.min(MAX))
}

/// Delay before the next pull after `failures` consecutive failed pulls of an image.
pub fn pull_delay(failures: u32) -> Duration {
    restart_delay(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_ten_seconds_to_five_minutes() {
        let secs: Vec<u64> = (0..9).map(|n| restart_delay(n).as_secs()).collect();
        assert_eq!(secs, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(restart_delay(200), MAX);
    }
}
