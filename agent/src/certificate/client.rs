//! A kube::Client whose credentials can be replaced while it runs: every clone the agent hands
//! out sends each request through the client current at that moment, so a renewed client
//! certificate is used for new requests at once, while requests already running (watches)
//! finish on their old connection. The old client, with its connection pool, is dropped when
//! its last request ends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Replaces the client behind [`rotating`]'s clones.
#[derive(Clone)]
pub struct ClientSwap {
    current: Arc<RwLock<kube::Client>>,
    kubeconfig: PathBuf,
}

/// A client sending through whatever `first` was last replaced by, and the handle that
/// replaces it (reading `kubeconfig` again).
pub fn rotating(first: kube::Client, kubeconfig: &Path) -> (kube::Client, ClientSwap) {
    let namespace = first.default_namespace().to_string();
    let current = Arc::new(RwLock::new(first));
    let swap = ClientSwap {
        current: current.clone(),
        kubeconfig: kubeconfig.to_path_buf(),
    };
    let service = tower::service_fn(move |request| {
        let client = match current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        async move { client.send(request).await }
    });
    (kube::Client::new(service, namespace), swap)
}

impl ClientSwap {
    /// Builds a client from the kubeconfig (and the certificate it names) and sends every new
    /// request through it.
    pub async fn reload(&self) -> Result<(), keelson_daemon::ClientError> {
        let fresh = keelson_daemon::client(Some(&self.kubeconfig)).await?;
        match self.current.write() {
            Ok(mut c) => *c = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }
}
