//! Lifecycle handlers as the kubelet runs them for postStart and preStop: sleep, exec through
//! CRI ExecSync, or an HTTP GET as a probe sends it (any answer counts as done).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};

use crate::cri::Cri;
use crate::pod::probe::{self, HttpTarget, ProbeError};

/// Why a lifecycle hook failed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Handler(#[from] ProbeError),
    #[error("tcpSocket is not supported as a lifecycle handler")]
    TcpSocket,
    #[error("the hook has no handler (exec, httpGet or sleep)")]
    NoHandler,
    #[error("did not complete within the grace period of {0}s")]
    TimedOut(i64),
}

/// The container a handler runs against.
pub struct Target<'a> {
    pub id: &'a str,
    pub pod_ip: &'a str,
    /// The runtime's timeout for an exec handler (0: none, as for postStart).
    pub exec_timeout: i64,
}

pub async fn run(
    cri: &dyn Cri,
    handler: &LifecycleHandler,
    spec: &Container,
    target: &Target<'_>,
) -> Result<(), HookError> {
    if let Some(sleep) = &handler.sleep {
        let seconds = u64::try_from(sleep.seconds).unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        return Ok(());
    }
    if let Some(exec) = &handler.exec {
        let command = exec.command.clone().unwrap_or_default();
        let answer = cri.exec_sync(target.id, command, target.exec_timeout).await;
        let answer = answer.map_err(ProbeError::from)?;
        if answer.exit_code != 0 {
            return Err(HookError::Handler(ProbeError::ExitCode {
                code: answer.exit_code,
                stdout: String::from_utf8_lossy(&answer.stdout).into_owned(),
            }));
        }
        return Ok(());
    }
    if let Some(http) = &handler.http_get {
        let target = HttpTarget::of(http, spec, target.pod_ip)?;
        probe::http_get(&target).await?;
        return Ok(());
    }
    if handler.tcp_socket.is_some() {
        return Err(HookError::TcpSocket);
    }
    Err(HookError::NoHandler)
}
