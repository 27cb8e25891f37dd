//! How long a connection may take to say something, and how many may be open at once.

use std::time::Duration;

/// Limits on the connections one HTTPS server keeps open.
#[derive(Clone, Debug, PartialEq)]
pub struct Connections {
    /// From accept to the end of the TLS handshake (Go's servers have none by default; a client
    /// that connects and says nothing would hold its file descriptor for ever).
    pub handshake_timeout: Duration,
    /// From the handshake to the end of the first request's header (HTTP/1), or to the end of
    /// the HTTP/2 preface; then per request (HTTP/1). kube-apiserver uses 32 s.
    pub header_read_timeout: Duration,
    /// Connections open at once; when reached, the next connection waits in the kernel's accept
    /// queue until one closes (as Go's netutil.LimitListener).
    pub max_open: usize,
    /// HTTP/2 pings after this long without a frame from the client; a client that does not
    /// answer within `ping_timeout` is disconnected (a watch whose peer vanished).
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
}

/// Environment variables that override the limits (seconds may have decimals).
pub const MAX_OPEN_ENV: &str = "KEELSON_MAX_OPEN_CONNECTIONS";
pub const HANDSHAKE_TIMEOUT_ENV: &str = "KEELSON_TLS_HANDSHAKE_TIMEOUT_SECONDS";
pub const HEADER_READ_TIMEOUT_ENV: &str = "KEELSON_HEADER_READ_TIMEOUT_SECONDS";

impl Connections {
    /// The defaults with at most `max_open` connections open.
    pub fn with_max_open(max_open: usize) -> Connections {
        Connections {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            max_open,
            ping_interval: Duration::from_secs(60),
            ping_timeout: Duration::from_secs(20),
        }
    }

    /// These limits with the environment's overrides; a value that does not parse is logged
    /// and left out.
    pub fn from_env(self) -> Connections {
        self.overridden(|name| std::env::var(name).ok())
    }

    fn overridden(mut self, var: impl Fn(&str) -> Option<String>) -> Connections {
        let seconds = |name: &str, default: Duration| {
            var(name).map_or(default, |v| match v.trim().parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
                _ => ignored(name, &v, default),
            })
        };
        self.handshake_timeout = seconds(HANDSHAKE_TIMEOUT_ENV, self.handshake_timeout);
        self.header_read_timeout = seconds(HEADER_READ_TIMEOUT_ENV, self.header_read_timeout);
        if let Some(v) = var(MAX_OPEN_ENV) {
            self.max_open = match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => n.min(tokio::sync::Semaphore::MAX_PERMITS),
                _ => ignored(MAX_OPEN_ENV, &v, self.max_open),
            };
        }
        self
    }
}

fn ignored<T: std::fmt::Debug>(name: &str, value: &str, default: T) -> T {
    tracing::warn!(
        variable = name,
        value,
        using = ?default,
        "ignoring an environment variable that is not a positive number"
    );
    default
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_what_parses() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let base = Connections::with_max_open(100);
        assert_eq!(base.clone().overridden(env(&[])), base);
        let set = base.clone().overridden(env(&[
            (MAX_OPEN_ENV, "7"),
            (HANDSHAKE_TIMEOUT_ENV, "0.5"),
            (HEADER_READ_TIMEOUT_ENV, " 2 "),
        ]));
        assert_eq!(set.max_open, 7);
        assert_eq!(set.handshake_timeout, Duration::from_millis(500));
        assert_eq!(set.header_read_timeout, Duration::from_secs(2));
        let bad = base.clone().overridden(env(&[
            (MAX_OPEN_ENV, "0"),
            (HANDSHAKE_TIMEOUT_ENV, "-1"),
            (HEADER_READ_TIMEOUT_ENV, "soon"),
        ]));
        assert_eq!(bad, base);
    }
}
