//! The rotation loop: read the current certificate, sleep until its renewal deadline, ask for
//! a new one with the node's own credentials, write it whole over the current file, hand it
//! to its users; on failure retry (counted in the metrics) until it works.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::client::ClientSwap;
use super::deadline::{self, Validity};
use super::serving::{self, ServingCert};
use crate::bootstrap::{self, csr, kubeconfig, unix_now, BootstrapError};
use crate::metrics::{CertKind, Metrics};

/// How long one renewal waits for approval and signing before it counts as failed.
const WAIT_FOR_SIGNING: Duration = Duration::from_secs(600);

/// What is rotated, and who takes the new certificate.
pub enum Target {
    /// The client certificate: new requests go through a client built on it.
    Client(ClientSwap),
    /// The serving certificate for these DNS names and addresses: new handshakes present it.
    Serving {
        names: Vec<String>,
        server: Arc<ServingCert>,
    },
}

pub struct Rotation {
    pub node_name: String,
    /// Where the current pair is (certificate, then key), replaced whole by each renewal.
    pub cert_file: PathBuf,
    pub target: Target,
    pub metrics: Arc<Metrics>,
}

#[derive(Debug, thiserror::Error)]
enum RenewError {
    #[error(transparent)]
    Csr(#[from] BootstrapError),
    #[error("rebuilding the API client: {0}")]
    Client(#[from] keelson_daemon::ClientError),
    #[error("the issued certificate: {0}")]
    Unusable(String),
}

impl Rotation {
    fn kind(&self) -> CertKind {
        match self.target {
            Target::Client(_) => CertKind::Client,
            Target::Serving { .. } => CertKind::Server,
        }
    }

    /// The current certificate's validity; None when there is none to read (renew at once).
    fn current(&self) -> Option<Validity> {
        let pem = std::fs::read(&self.cert_file).ok()?;
        match deadline::validity(&pem) {
            Ok(v) => Some(v),
            Err(why) => {
                tracing::warn!(file = %self.cert_file.display(), "{why}; renewing now");
                None
            }
        }
    }

    /// Renews forever, using `client` (the node's own identity) to send the requests.
    pub async fn run(self, client: kube::Client) {
        let kind = self.kind();
        loop {
            if let Some(v) = self.current() {
                self.metrics.set_certificate_expiry(kind, v.not_after);
                let at = deadline::renewal_deadline(&v, rand::random::<f64>());
                let wait = u64::try_from(at - unix_now()).unwrap_or(0);
                tracing::info!(certificate = kind.name(), serial = %v.serial,
                    not_after = v.not_after, "certificate rotation in {wait}s");
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
            self.renew_with_retries(&client, kind).await;
        }
    }

    /// Renews, retrying with back-off (each failure counted) until it works.
    async fn renew_with_retries(&self, client: &kube::Client, kind: CertKind) {
        let mut failures = 0u32;
        loop {
            match self.renew(client).await {
                Ok(v) => {
                    self.metrics.set_certificate_expiry(kind, v.not_after);
                    tracing::info!(certificate = kind.name(), serial = %v.serial,
                        file = %self.cert_file.display(), "certificate rotated");
                    return;
                }
                Err(e) => {
                    self.metrics.certificate_renew_error(kind);
                    let now = unix_now();
                    let expired = Validity {
                        not_before: now,
                        not_after: now,
                        serial: String::new(),
                    };
                    let v = self.current().unwrap_or(expired);
                    if kind == CertKind::Client && now >= v.not_after {
                        // As the kubelet: a restarted agent bootstraps a new certificate with
                        // --bootstrap-kubeconfig, which this one can no longer do for itself.
                        tracing::error!(error = %e, file = %self.cert_file.display(),
                            "the client certificate expired and could not be renewed; exiting so that the restarted agent bootstraps a new one");
                        std::process::exit(1);
                    }
                    let retry = deadline::retry_after(failures, &v, now);
                    failures = failures.saturating_add(1);
                    tracing::warn!(certificate = kind.name(), error = %e,
                        "certificate renewal failed; retrying in {retry}s");
                    tokio::time::sleep(Duration::from_secs(retry)).await;
                }
            }
        }
    }

    /// One renewal: a new key, a CSR, the signed certificate written with its key, handed over.
    async fn renew(&self, client: &kube::Client) -> Result<Validity, RenewError> {
        let name = csr::name();
        let (request, object) = match &self.target {
            Target::Client(_) => {
                let r = csr::request(&self.node_name).map_err(BootstrapError::Key)?;
                let o = csr::object(&name, &r.csr_pem);
                (r, o)
            }
            Target::Serving { names, .. } => {
                let r =
                    csr::request_with_names(&self.node_name, names).map_err(BootstrapError::Key)?;
                let o =
                    csr::object_for(&name, &r.csr_pem, csr::SERVING_SIGNER, &csr::SERVING_USAGES);
                (r, o)
            }
        };
        let (_, cert) = bootstrap::send_and_wait(client, object, WAIT_FOR_SIGNING).await?;
        if let Some(why) = kubeconfig::cert_problem(cert.as_bytes(), unix_now()) {
            return Err(RenewError::Unusable(why));
        }
        let pair = format!("{cert}{}", request.key_pem);
        let validity = deadline::validity(pair.as_bytes()).map_err(RenewError::Unusable)?;
        let key = match &self.target {
            Target::Serving { .. } => {
                Some(serving::from_pem(pair.as_bytes()).map_err(RenewError::Unusable)?)
            }
            Target::Client(_) => None,
        };
        bootstrap::write_private(&self.cert_file, &pair)?;
        match (&self.target, key) {
            (Target::Client(swap), _) => swap.reload().await?,
            (Target::Serving { server, .. }, Some(key)) => server.replace(key),
            (Target::Serving { .. }, None) => {}
        }
        Ok(validity)
    }
}
