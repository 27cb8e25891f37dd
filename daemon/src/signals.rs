//! Stopping on SIGTERM (what systemd and kubectl-driven tests send) or SIGINT (Ctrl-C).

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Resolves on the first SIGTERM or SIGINT. If the handlers cannot be installed it never
/// resolves (the daemon then stops only by SIGKILL), and says so in the log.
pub async fn shutdown_signal() {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install SIGTERM/SIGINT handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received, stopping"),
        _ = int.recv() => tracing::info!("SIGINT received, stopping"),
    }
}

/// A shutdown that many tasks can wait for, any number of times (a loop's `select!` arm).
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Starts waiting for SIGTERM/SIGINT (needs a tokio runtime).
    pub fn on_signal() -> Shutdown {
        let (tx, shutdown) = Shutdown::manual();
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = tx.send(true);
        });
        shutdown
    }

    /// A shutdown triggered by sending `true` (tests, or a daemon's own reasons to stop).
    pub fn manual() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown(rx))
    }

    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once shutdown was requested (at once if it already was).
    pub async fn requested(&self) {
        let mut rx = self.0.clone();
        // A dropped sender without a request means no shutdown will ever come from it.
        if rx.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
