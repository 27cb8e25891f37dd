//! Runs an `Nginx` on a dedicated OS thread. nginx is started from that thread, which lives as
//! long as the process, so PR_SET_PDEATHSIG fires only when the controller itself dies.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::error::NginxError;
use crate::nginx::Nginx;
use crate::tls::Cert;

enum Command {
    Apply(String, Vec<Cert>, oneshot::Sender<Result<(), NginxError>>),
    Test(String, Vec<Cert>, oneshot::Sender<Result<(), NginxError>>),
    Running(oneshot::Sender<bool>),
    Stop(oneshot::Sender<Result<(), NginxError>>),
}

#[derive(Clone)]
pub struct NginxWorker {
    tx: mpsc::Sender<Command>,
}

impl NginxWorker {
    pub fn spawn(mut nginx: impl Nginx + 'static) -> Self {
        let (tx, rx) = mpsc::channel::<Command>();
        std::thread::Builder::new()
            .name("nginx".into())
            .spawn(move || {
                for cmd in rx {
                    match cmd {
                        Command::Apply(text, certs, reply) => {
                            let _ = reply.send(nginx.apply(&text, &certs));
                        }
                        Command::Test(text, certs, reply) => {
                            let _ = reply.send(nginx.test(&text, &certs));
                        }
                        Command::Running(reply) => {
                            let _ = reply.send(nginx.running());
                        }
                        Command::Stop(reply) => {
                            let _ = reply.send(nginx.stop());
                        }
                    }
                }
            })
            .expect("spawn the nginx thread");
        NginxWorker { tx }
    }

    pub async fn apply(&self, text: String, certs: Vec<Cert>) -> Result<(), NginxError> {
        self.call(|reply| Command::Apply(text, certs, reply)).await
    }

    /// `nginx -t` of a configuration that is not loaded.
    pub async fn test(&self, text: String, certs: Vec<Cert>) -> Result<(), NginxError> {
        self.call(|reply| Command::Test(text, certs, reply)).await
    }

    async fn call(
        &self,
        command: impl FnOnce(oneshot::Sender<Result<(), NginxError>>) -> Command,
    ) -> Result<(), NginxError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(command(reply))
            .map_err(|_| NginxError::WorkerGone)?;
        rx.await.map_err(|_| NginxError::WorkerGone)?
    }

    pub async fn running(&self) -> bool {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::Running(reply)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    pub async fn stop(&self) -> Result<(), NginxError> {
        self.call(Command::Stop).await
    }
}
