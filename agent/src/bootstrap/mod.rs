//! TLS bootstrap, as the kubelet's: when `--kubeconfig` is missing, or its client certificate is
//! unreadable or out of its validity, the agent makes its own key, asks for a client certificate
//! with a CertificateSigningRequest sent with the bootstrap kubeconfig (a bootstrap token), waits
//! for the controller manager to approve and sign it, and writes the certificate with its key and
//! a kubeconfig naming them. From then on the node is `system:node:<name>` and needs neither the
//! token nor any admin credentials.

pub mod csr;
pub mod join;
pub mod kubeconfig;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, PostParams};
use kube::runtime::{watcher, WatchStreamExt};

/// The node's client certificate and key, in `--cert-dir`.
pub const CLIENT_CERT_FILE: &str = "keelson-agent-client-current.pem";

/// How long the agent waits for its certificate before it gives up (and exits, to be restarted).
pub const WAIT_FOR_CERTIFICATE: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug)]
pub struct Settings {
    pub node_name: String,
    /// None: `kubeconfig` is used as it is (an admin's, or written by hand).
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub kubeconfig: PathBuf,
    pub cert_dir: PathBuf,
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("bootstrap kubeconfig {path}: {why}")]
    BootstrapKubeconfig { path: String, why: String },
    #[error(transparent)]
    Client(#[from] keelson_daemon::ClientError),
    #[error("making the node's key and certificate signing request: {0}")]
    Key(#[from] rcgen::Error),
    #[error("sending CertificateSigningRequest {name}: {source}")]
    Create {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("CertificateSigningRequest {name}: {why}")]
    Refused { name: String, why: String },
    #[error("CertificateSigningRequest {name} got no certificate within {secs}s (it needs approving and signing: the controller manager with --cluster-signing-cert-file and --cluster-signing-key-file, or kubectl certificate approve)")]
    Timeout { name: String, secs: u64 },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Makes sure `--kubeconfig` holds the node's own valid credentials, bootstrapping them with
/// the bootstrap kubeconfig when it does not. Without a bootstrap kubeconfig, nothing to do.
pub async fn ensure(s: &Settings) -> Result<(), BootstrapError> {
    let Some(bootstrap) = &s.bootstrap_kubeconfig else {
        return Ok(());
    };
    let kubeconfig = s.kubeconfig.display().to_string();
    match kubeconfig::problem(&s.kubeconfig, unix_now()) {
        None => {
            tracing::info!(%kubeconfig, "using the node's client certificate");
            return Ok(());
        }
        Some(why) => tracing::info!(
            %kubeconfig,
            "{why}; requesting a client certificate with the bootstrap kubeconfig"
        ),
    }
    let bad = |why: String| BootstrapError::BootstrapKubeconfig {
        path: bootstrap.display().to_string(),
        why,
    };
    let kc = kube::config::Kubeconfig::read_from(bootstrap).map_err(|e| bad(e.to_string()))?;
    let cluster = kubeconfig::current_cluster(&kc).map_err(bad)?;
    let client = keelson_daemon::client(Some(bootstrap)).await?;
    let request = csr::request(&s.node_name)?;
    let (name, cert) = request_certificate(&client, &request.csr_pem, s.timeout).await?;
    if let Some(why) = kubeconfig::cert_problem(cert.as_bytes(), unix_now()) {
        let why = format!("the issued certificate cannot be used: {why}");
        return Err(BootstrapError::Refused { name, why });
    }
    let cert_file = std::path::absolute(s.cert_dir.join(CLIENT_CERT_FILE))
        .map_err(|source| write_error(&s.cert_dir, source))?;
    write_private(&cert_file, &format!("{cert}{}", request.key_pem))?;
    let text = kubeconfig::render(&cluster, &cert_file)
        .map_err(|e| write_error(&s.kubeconfig, std::io::Error::other(e)))?;
    write_private(&s.kubeconfig, &text)?;
    tracing::info!(%kubeconfig, cert = %cert_file.display(), csr = %name,
        "client certificate issued; the node now acts as system:node:{}", s.node_name);
    Ok(())
}

/// Sends the client CSR and waits (watching it) until it is signed, refused, or `timeout`
/// passes. Returns the CSR's name and the certificate (PEM).
async fn request_certificate(
    client: &kube::Client,
    csr_pem: &str,
    timeout: Duration,
) -> Result<(String, String), BootstrapError> {
    let name = csr::name();
    send_and_wait(client, csr::object(&name, csr_pem), timeout).await
}

/// Sends `object` and waits until it is signed, refused, or `timeout` passes.
pub(crate) async fn send_and_wait(
    client: &kube::Client,
    object: CertificateSigningRequest,
    timeout: Duration,
) -> Result<(String, String), BootstrapError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let name = object.metadata.name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|source| BootstrapError::Create {
            name: name.clone(),
            source,
        })?;
    tracing::info!(csr = %name, "CertificateSigningRequest sent; waiting for it to be approved and signed");
    match tokio::time::timeout(timeout, wait_for_certificate(&api, &name)).await {
        Ok(result) => result.map(|cert| (name, cert)),
        Err(_) => Err(BootstrapError::Timeout {
            name,
            secs: timeout.as_secs(),
        }),
    }
}

/// Watches the CSR by name until it has a certificate or is Denied/Failed; logs progress.
async fn wait_for_certificate(
    api: &Api<CertificateSigningRequest>,
    name: &str,
) -> Result<String, BootstrapError> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(api.clone(), config)
        .default_backoff()
        .applied_objects();
    let mut stream = std::pin::pin!(stream);
    let mut progress = tokio::time::interval(Duration::from_secs(10));
    progress.tick().await;
    let mut approved = false;
    loop {
        tokio::select! {
            item = stream.try_next() => match item {
                Ok(Some(csr)) => match csr::outcome(&csr) {
                    csr::Outcome::Issued(cert) => return Ok(cert),
                    csr::Outcome::Refused(why) => {
                        return Err(BootstrapError::Refused { name: name.to_string(), why })
                    }
                    csr::Outcome::Pending { approved: a } => approved = a,
                },
                // The watcher restarts by itself; an end or an error only delays.
                Ok(None) => tokio::time::sleep(Duration::from_secs(1)).await,
                Err(e) => tracing::warn!(csr = %name, error = %e, "watching the CertificateSigningRequest"),
            },
            _ = progress.tick() => tracing::info!(
                csr = %name,
                approved,
                "still waiting for the client certificate"
            ),
        }
    }
}

pub(crate) fn write_error(path: &Path, source: std::io::Error) -> BootstrapError {
    BootstrapError::Write {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `text` readable by its owner only (0600), through a temporary file and a rename so
/// that a reader never sees half of it.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), BootstrapError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| write_error(&tmp, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| write_error(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| write_error(path, e))
}

pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn credentials_are_written_owner_only_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pki").join(CLIENT_CERT_FILE);
        write_private(&path, "first").unwrap();
        write_private(&path, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [CLIENT_CERT_FILE], "no temporary file left");
    }

    #[tokio::test]
    async fn without_a_bootstrap_kubeconfig_the_kubeconfig_is_used_as_it_is() {
        let s = Settings {
            node_name: "n1".into(),
            bootstrap_kubeconfig: None,
            kubeconfig: "/nonexistent/kubeconfig".into(),
            cert_dir: "/nonexistent/pki".into(),
            timeout: Duration::from_secs(1),
        };
        ensure(&s).await.unwrap();
    }
}
