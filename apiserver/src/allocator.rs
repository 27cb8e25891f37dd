//! The allocator: mimalloc, and what returns its idle memory to the system.

use std::cell::Cell;
use std::time::{Duration, Instant};

// Every request allocates many small JSON values; glibc's malloc spent an eighth of the server's
// CPU on them under 64 concurrent writers, mimalloc less (scripts/bench apiserver).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's (linked by the `mimalloc` crate): frees this thread's empty pages, with what
    /// other threads freed in them, and with `force` returns freed memory to the OS at once.
    fn mi_collect(force: bool);
}

/// At most one collection per worker in this time: short, so that the one due after a burst
/// is rarely skipped before the worker sleeps (at 100 ms, RSS read just after the scale bench
/// was 154 or 179 MiB from one run to the next; at 25 ms, 155 and 156).
const EVERY: Duration = Duration::from_millis(25);

/// Called as a runtime worker goes idle. A block freed by another thread than the one that
/// allocated it (a connection's buffers when its task moved between workers) stays counted
/// until its owner collects, and an idle owner never does: after 1,000 watch connections
/// closed, 25 MiB stayed resident, and mimalloc's purge, delayed 1 s, kept the rest of what
/// was freed (scripts/bench apiserver scale). Forced, a collection took 0.3 ms on average
/// there; writes/s and create latency (scripts/bench apiserver) did not change measurably.
pub fn collect_when_idle() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    if LAST.get().is_some_and(|t| now.duration_since(t) < EVERY) {
        return;
    }
    LAST.set(Some(now));
    // SAFETY: mi_collect only reads and frees this thread's own allocator state.
    unsafe { mi_collect(true) };
}
