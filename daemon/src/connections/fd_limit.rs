//! The soft limit on open files is often 1,024 (systemd's default for services, most shells'),
//! fewer than the connections a server should hold; the hard limit is what the administrator
//! allows. Go's runtime raises the soft limit to the hard one at start (since Go 1.19), so
//! kube-apiserver and the kubelet run with it; Keelson's servers do the same.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises this process's soft limit on open files to its hard limit; a failure is logged (the
/// server runs on with the limit it has).
pub fn raise_open_files_limit() {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => return tracing::warn!(error = %e, "reading the limit on open files"),
    };
    if soft >= hard {
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => tracing::debug!(from = soft, to = hard, "raised the limit on open files"),
        Err(e) => tracing::warn!(error = %e, soft, hard, "raising the limit on open files"),
    }
}
