//! What every pod worker shares: the CRI client, the API client, node settings and the latest
//! pods from the watch.

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use keelson_daemon::Informer;

use super::security::Rejection;
use super::translate::NodeSettings;
use crate::cri::Cri;
use crate::metrics::Metrics;

pub struct Context {
    pub cri: Arc<dyn Cri>,
    pub client: kube::Client,
    pub settings: NodeSettings,
    /// Volumes live under `<root>/pods/<uid>`.
    pub root: PathBuf,
    pub host_ip: String,
    pub metrics: Arc<Metrics>,
    pub events: super::events::Recorder,
    /// Latest version of every pod bound to this node, by UID (filled by the pod manager).
    pub pods: Informer<Arc<Pod>>,
    /// The `kubernetes` Service's link variables, given to every container.
    pub service_links: super::service_env::ServiceLinks,
    /// Service-account tokens of the pods' projected volumes.
    pub tokens: super::tokens::TokenManager,
    /// The node's pressure conditions (the eviction manager's), for admitting new pods.
    pub pressure: crate::eviction::pressure::PressureConditions,
    /// Static pods from `--pod-manifest-path`, by UID (run as the API's pods are).
    pub static_pods: std::sync::RwLock<std::collections::BTreeMap<String, Arc<Pod>>>,
    /// The QoS cgroup tree the pods' cgroups sit in.
    pub cgroups: Arc<crate::cgroups::QosCgroups>,
    /// Pods the node ends (the eviction manager's, a node shutdown's), by UID: their workers
    /// stop them and report why.
    pub evictions: std::sync::Mutex<std::collections::HashMap<String, Ending>>,
    /// Set while the node shuts down: new pods are refused.
    pub shutting_down: std::sync::atomic::AtomicBool,
}

/// Why the node ends a pod, and the grace period its containers get when not the pod's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub why: Rejection,
    pub grace: Option<i64>,
}

impl Context {
    pub fn evict(&self, uid: &str, ending: Ending) {
        if let Ok(mut e) = self.evictions.lock() {
            e.insert(uid.to_string(), ending);
        }
    }

    /// The eviction decided for the pod, if any.
    pub fn eviction(&self, uid: &str) -> Option<Ending> {
        self.evictions.lock().ok()?.get(uid).cloned()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn is_evicted(&self, uid: &str) -> bool {
        self.eviction(uid).is_some()
    }

    /// The pod this node runs with that UID: a static pod, or one from the API (never a
    /// mirror pod, which only shows a static pod in the API).
    pub fn pod(&self, uid: &str) -> Option<Arc<Pod>> {
        let found = self
            .static_pods
            .read()
            .ok()
            .and_then(|s| s.get(uid).cloned());
        found.or_else(|| {
            self.pods
                .get(uid)
                .filter(|p| !super::static_pods::is_mirror(p))
        })
    }

    /// Every pod this node runs: the static pods and the API's (mirror pods left out).
    pub fn all_pods(&self) -> Vec<Arc<Pod>> {
        let mut out: Vec<Arc<Pod>> = match self.static_pods.read() {
            Ok(s) => s.values().cloned().collect(),
            Err(_) => Vec::new(),
        };
        let pods = self.pods.read();
        out.extend(
            pods.values()
                .filter(|p| !super::static_pods::is_mirror(p))
                .cloned(),
        );
        out
    }

    /// The pod this node runs under that name (a static pod rather than its mirror).
    pub fn find(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let named = |p: &&Arc<Pod>| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        };
        let statics = self.static_pods.read().ok();
        if let Some(p) = statics
            .as_ref()
            .and_then(|s| s.values().find(named).cloned())
        {
            return Some(p);
        }
        let pods = self.pods.read();
        pods.values()
            .filter(|p| !super::static_pods::is_mirror(p))
            .find(named)
            .cloned()
    }

    /// Sets the static pods; returns the ones before.
    pub fn replace_static_pods(
        &self,
        pods: std::collections::BTreeMap<String, Arc<Pod>>,
    ) -> std::collections::BTreeMap<String, Arc<Pod>> {
        match self.static_pods.write() {
            Ok(mut s) => std::mem::replace(&mut *s, pods),
            Err(_) => Default::default(),
        }
    }
}
