//! Accepting within the connection cap, and what to do when accept fails: out of file
//! descriptors, accept fails at once for as long as the queue holds a connection, so the loop
//! waits (10 ms doubling to 1 s, as Go's net/http) and logs one line per kind of error per
//! interval instead of one per attempt.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const FIRST_DELAY: Duration = Duration::from_millis(10);
const MAX_DELAY: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The wait before the next accept after a failure: doubling from 10 ms to 1 s, reset by a
/// success.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    delay: Option<Duration>,
}

impl Backoff {
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self
            .delay
            .map_or(FIRST_DELAY, |d| d.saturating_mul(2).min(MAX_DELAY));
        self.delay = Some(delay);
        delay
    }

    pub(crate) fn reset(&mut self) {
        self.delay = None;
    }
}

/// Admits one log line per kind of event per interval; the ones in between are counted and
/// reported with the next line.
#[derive(Debug)]
pub struct RateLimitedLog {
    every: Duration,
    kinds: HashMap<String, (Instant, u64)>,
}

impl RateLimitedLog {
    pub fn new(every: Duration) -> RateLimitedLog {
        RateLimitedLog {
            every,
            kinds: HashMap::new(),
        }
    }

    /// `Some(left out since the last line)` when a line for `kind` is due at `now`.
    pub fn admit(&mut self, kind: &str, now: Instant) -> Option<u64> {
        match self.kinds.get_mut(kind) {
            Some((last, left_out)) if now.saturating_duration_since(*last) < self.every => {
                *left_out = left_out.saturating_add(1);
                None
            }
            Some((last, left_out)) => {
                *last = now;
                Some(std::mem::take(left_out))
            }
            None => {
                self.kinds.insert(kind.to_string(), (now, 0));
                Some(0)
            }
        }
    }
}

/// Errors that belong to one connection (the client gave up before accept): the listener is
/// fine, so the next accept needs no wait.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// The listener with the cap on open connections, the back-off and the rate-limited log.
pub(crate) struct Acceptor {
    listener: TcpListener,
    open: Arc<Semaphore>,
    max_open: usize,
    backoff: Backoff,
    log: RateLimitedLog,
}

impl Acceptor {
    pub(crate) fn new(listener: TcpListener, max_open: usize) -> Acceptor {
        Acceptor {
            listener,
            open: Arc::new(Semaphore::new(max_open)),
            max_open,
            backoff: Backoff::default(),
            log: RateLimitedLog::new(LOG_EVERY),
        }
    }

    /// The next connection, with the permit it holds until it closes.
    pub(crate) async fn next(&mut self) -> (TcpStream, Option<OwnedSemaphorePermit>) {
        let permit = self.permit().await;
        loop {
            match self.listener.accept().await {
                Ok((tcp, _)) => {
                    self.backoff.reset();
                    return (tcp, permit);
                }
                Err(e) if is_connection_error(&e) => {
                    tracing::debug!(error = %e, "a connection ended before accept");
                }
                Err(e) => self.failed(e).await,
            }
        }
    }

    async fn permit(&mut self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = self.open.clone().try_acquire_owned() {
            return Some(permit);
        }
        if let Some(left_out) = self.log.admit("limit", Instant::now()) {
            tracing::warn!(
                max_open = self.max_open,
                times_since_last_line = left_out,
                "open connection limit reached; new connections wait until one closes"
            );
        }
        // Only a closed semaphore fails, and this one is never closed.
        self.open.clone().acquire_owned().await.ok()
    }

    async fn failed(&mut self, e: io::Error) {
        let delay = self.backoff.next_delay();
        let kind = e
            .raw_os_error()
            .map_or_else(|| format!("{:?}", e.kind()), |n| n.to_string());
        if let Some(left_out) = self.log.admit(&kind, Instant::now()) {
            tracing::warn!(
                error = %e,
                retry_in = ?delay,
                times_since_last_line = left_out,
                "accept failed"
            );
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u128> = (0..9).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), FIRST_DELAY);
    }

    #[test]
    fn one_line_per_kind_per_interval_with_the_count_left_out() {
        let mut log = RateLimitedLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s);
        assert_eq!(log.admit("24", at(0)), Some(0));
        assert_eq!(log.admit("24", at(10)), None);
        assert_eq!(log.admit("24", at(9_999)), None);
        assert_eq!(log.admit("limit", at(9_999)), Some(0), "another kind");
        assert_eq!(log.admit("24", at(10_000)), Some(2));
        assert_eq!(log.admit("24", at(10_001)), None);
        assert_eq!(log.admit("24", at(25_000)), Some(1));
    }
}
