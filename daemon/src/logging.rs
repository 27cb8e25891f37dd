//! One log setup for every binary: text to stderr, filtered by RUST_LOG.

use std::io::IsTerminal;

/// Logs to stderr at the level RUST_LOG asks for (default `info`). Calling it twice is harmless.
pub fn init_logging() {
    init_logging_with_default("info");
}

/// `init_logging` with another default filter (the CNI plugin logs only warnings by default:
/// its stderr reaches the runtime's log on every call).
pub fn init_logging_with_default(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: journald and log files get plain `key=value` fields.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
