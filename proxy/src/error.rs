//! Errors of the proxy library.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProxyError {
    #[error("cannot start {program}: {source} (is it installed? see scripts/deps.d/proxy.txt)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open network namespace {path}: {source}")]
    Netns {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} failed (exit {status}) while {what}: {stderr}")]
    Command {
        program: String,
        what: String,
        status: i32,
        stderr: String,
    },
    #[error("cannot parse {what}: {detail}")]
    Parse { what: String, detail: String },
    #[error("invalid option {option}: {detail}")]
    Config { option: String, detail: String },
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
}
