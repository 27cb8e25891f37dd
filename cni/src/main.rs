//! keelson-cni binary: reads CNI_* and stdin, prints the result or error, sets the exit code.

// No panic reachable from input: a panic in a node daemon drops pods' networking or their lifecycle.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::io::{Read, Write};

fn main() -> anyhow::Result<()> {
    // Logs go to stderr only when asked for: stdout belongs to the CNI protocol.
    if let Ok(filter) = std::env::var("KEELSON_CNI_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().collect();
    // Runtimes call plugins without arguments; `install <dir>` is for people and the agent.
    if args.get(1).map(String::as_str) == Some("install") {
        let dir = args
            .get(2)
            .ok_or_else(|| anyhow::anyhow!("usage: keelson-cni install <cni-bin-dir>"))?;
        let me = std::env::current_exe()?;
        keelson_cni::install::install(&me, std::path::Path::new(dir))?;
        println!(
            "installed {} into {dir}",
            keelson_cni::install::BIN_NAMES.join(", ")
        );
        return Ok(());
    }
    let argv0 = args.first().cloned().unwrap_or_default();
    let mut stdin = Vec::new();
    let is_version = std::env::var("CNI_COMMAND").is_ok_and(|c| c == "VERSION");
    // VERSION may be called with nothing on stdin; do not block on a terminal.
    if !is_version || !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        std::io::stdin().read_to_end(&mut stdin)?;
    }
    let getenv = |k: &str| std::env::var(k).ok();
    let outcome = keelson_cni::run(&keelson_cni::Invocation {
        argv0: &argv0,
        stdin: &stdin,
        getenv: &getenv,
    });
    if let Some(text) = outcome.stdout {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
        out.flush()?;
    }
    tracing::debug!("done");
    if outcome.error.is_some() {
        std::process::exit(1);
    }
    Ok(())
}
