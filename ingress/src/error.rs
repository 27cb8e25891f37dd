//! Errors a user can act on: what failed, on what, and nginx's own words when it refused.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum NginxError {
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("nginx rejected the new configuration (the previous one keeps serving): {message}")]
    Rejected { message: String },
    #[error("nginx exited right after start ({status}): {message}")]
    Exited { status: String, message: String },
    #[error("cannot send {signal} to nginx: {message}")]
    Signal {
        signal: &'static str,
        message: String,
    },
    #[error("the nginx worker thread is gone")]
    WorkerGone,
}

impl NginxError {
    pub fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        NginxError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
    #[error(transparent)]
    Nginx(#[from] NginxError),
}
