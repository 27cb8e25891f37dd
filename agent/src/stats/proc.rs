//! The node's own CPU time and memory, parsed from /proc/stat and /proc/meminfo (pure; the
//! files are read in `mod.rs`).

/// Linux reports /proc/stat in USER_HZ ticks, which is 100 on every architecture the kernel
/// exposes to user space (the ABI fixes it regardless of CONFIG_HZ).
const NANOS_PER_TICK: u64 = 1_000_000_000 / 100;

/// CPU time the node spent doing work, all CPUs together, in nanoseconds: the `cpu` line's
/// user, nice, system, irq, softirq and steal ticks. Idle and iowait are time spent waiting,
/// and guest/guest_nice are already counted in user/nice, so they are left out.
pub fn cpu_usage_ns(stat: &str) -> Option<u64> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest guest_nice)
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| ticks.get(i))
        .sum();
    // Fewer than the four fields every kernel since 2.6 writes is not /proc/stat.
    (ticks.len() >= 4).then_some(busy * NANOS_PER_TICK)
}

/// When the node booted, in nanoseconds since the epoch (the `btime` line).
pub fn boot_time_ns(stat: &str) -> Option<i64> {
    let secs: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    secs.checked_mul(1_000_000_000)
}

/// The node's memory in bytes, as /proc/meminfo counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    pub free: u64,
    pub available: u64,
}

impl MemInfo {
    /// Memory in use that the kernel cannot simply drop: what the kubelet calls the working set
    /// and evicts on.
    pub fn working_set(&self) -> u64 {
        self.total.saturating_sub(self.available)
    }

    /// Everything not free, page cache included.
    pub fn usage(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

pub fn meminfo(text: &str) -> Option<MemInfo> {
    let field = |name: &str| -> Option<u64> {
        let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
        let kib: u64 = rest
            .trim_start_matches(':')
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        kib.checked_mul(1024)
    };
    Some(MemInfo {
        total: field("MemTotal:")?,
        free: field("MemFree:")?,
        available: field("MemAvailable:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  4705 356 584 3699176 23 0 27 5 7 1\n\
        cpu0 2352 178 292 1849588 11 0 13 2 3 0\n\
        intr 1 2 3\nctxt 1990473\nbtime 1733300000\nprocesses 2915\n";

    #[test]
    fn cpu_counts_busy_ticks_of_all_cpus() {
        // user+nice+system+irq+softirq+steal = 4705+356+584+0+27+5 ticks of 10 ms.
        assert_eq!(cpu_usage_ns(STAT), Some(5677 * 10_000_000));
    }

    #[test]
    fn cpu_of_an_old_kernel_line_and_garbage() {
        assert_eq!(cpu_usage_ns("cpu 10 0 5 100\n"), Some(15 * 10_000_000));
        assert_eq!(cpu_usage_ns("cpu0 1 2 3 4\n"), None);
        assert_eq!(cpu_usage_ns("cpu x y z\n"), None);
        assert_eq!(cpu_usage_ns("cpu 1 2\n"), None);
        assert_eq!(cpu_usage_ns(""), None);
    }

    #[test]
    fn boot_time_from_btime() {
        assert_eq!(boot_time_ns(STAT), Some(1_733_300_000_000_000_000));
        assert_eq!(boot_time_ns("cpu 1 2 3 4\n"), None);
    }

    #[test]
    fn meminfo_in_bytes_and_working_set() {
        let text = "MemTotal:        8000000 kB\nMemFree:         1000000 kB\n\
            MemAvailable:    6000000 kB\nBuffers:          100 kB\n";
        let m = meminfo(text).expect("parsed");
        assert_eq!(m.total, 8_000_000 * 1024);
        assert_eq!(m.working_set(), 2_000_000 * 1024);
        assert_eq!(m.usage(), 7_000_000 * 1024);
        // A kernel before 3.14 has no MemAvailable: no guess.
        assert_eq!(meminfo("MemTotal: 1 kB\nMemFree: 1 kB\n"), None);
    }
}
