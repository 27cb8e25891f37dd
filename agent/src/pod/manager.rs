//! Watches the pods bound to this node (fieldSelector spec.nodeName) and keeps one worker per pod;
//! relists the runtime every second so container exits are noticed within two seconds, and
//! tears down runtime pods the API no longer has.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use keelson_daemon::Change;
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::{mpsc, Mutex};

use super::context::Context;
use super::worker::{Msg, Worker};
use crate::cri::labels;

/// Whether an update changes anything the worker acts on (spec, deletion, labels, annotations).
pub fn needs_sync(old: &Pod, new: &Pod) -> bool {
    let (a, b) = (&old.metadata, &new.metadata);
    old.spec != new.spec
        || a.deletion_timestamp != b.deletion_timestamp
        || a.deletion_grace_period_seconds != b.deletion_grace_period_seconds
        || a.labels != b.labels
        || a.annotations != b.annotations
}

pub struct Manager {
    ctx: Arc<Context>,
    workers: Mutex<HashMap<String, mpsc::Sender<Msg>>>,
}

impl Manager {
    pub fn new(ctx: Arc<Context>) -> Arc<Self> {
        Arc::new(Manager {
            ctx,
            workers: Mutex::new(HashMap::new()),
        })
    }

    /// Sends a sync to the pod's worker, starting one if none runs.
    async fn poke(&self, uid: &str) {
        let mut workers = self.workers.lock().await;
        if let Some(tx) = workers.get(uid) {
            match tx.try_send(Msg::Sync) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        let (tx, rx) = mpsc::channel(4);
        let _ = tx.try_send(Msg::Sync);
        workers.insert(uid.to_string(), tx);
        self.ctx
            .metrics
            .pod_workers
            .set(i64::try_from(workers.len()).unwrap_or(0));
        let worker = Worker::new(uid.to_string(), self.ctx.clone(), rx);
        tokio::spawn(worker.run());
    }

    /// Has the pod's worker sync now (starting one if none runs).
    pub async fn sync(&self, uid: &str) {
        self.poke(uid).await;
    }

    /// Forgets workers that finished (their pods are gone).
    async fn reap(&self) {
        let mut workers = self.workers.lock().await;
        workers.retain(|_, tx| !tx.is_closed());
        self.ctx
            .metrics
            .pod_workers
            .set(i64::try_from(workers.len()).unwrap_or(0));
    }

    /// Starts the pod watch into `ctx.pods`; each change pokes the workers it concerns.
    pub fn watch(self: Arc<Self>) {
        let api: Api<Pod> = Api::all(self.ctx.client.clone());
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={}", self.ctx.settings.node_name));
        let uid = |p: &Pod| p.metadata.uid.clone();
        let manager = self.clone();
        // A server that ignores field selectors (an emulator) sends every node's pods: only
        // this node's are kept, so none is run on the wrong node.
        let node = self.ctx.settings.node_name.clone();
        self.ctx.pods.start(
            api,
            config,
            uid,
            move |p| {
                let here = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node);
                here.then(|| Arc::new(p))
            },
            move |change| {
                let manager = manager.clone();
                async move { manager.changed(change).await }
            },
        );
    }

    /// Pokes the workers of pods that appeared, went, or changed in what they act on.
    async fn changed(&self, change: Change<Arc<Pod>>) {
        match change {
            Change::Applied { key, old } => {
                // A status-only update (mostly the agent's own write coming back) needs no
                // runtime sync; a mirror pod runs nothing (its static pod does).
                let Some(new) = self.ctx.pod(&key) else {
                    return;
                };
                let new = Some(new);
                if old.zip(new).is_none_or(|(old, new)| needs_sync(&old, &new)) {
                    self.poke(&key).await;
                }
            }
            Change::Deleted { key, old } if !super::static_pods::is_mirror(&old) => {
                self.poke(&key).await
            }
            Change::Deleted { .. } => {}
            Change::Relisted { previous } => {
                let current = self.ctx.pods.read().clone();
                let run = current
                    .iter()
                    .filter(|(_, p)| !super::static_pods::is_mirror(p));
                for (uid, pod) in run {
                    if previous.get(uid).is_none_or(|old| needs_sync(old, pod)) {
                        self.poke(uid).await;
                    }
                }
                for uid in previous.keys().filter(|k| !current.contains_key(*k)) {
                    self.poke(uid).await;
                }
            }
        }
    }

    /// Lists this node's sandboxes and containers every second; a pod whose runtime state
    /// changed gets a sync, and so does a runtime pod the API does not have (it is torn down).
    pub async fn relist(self: Arc<Self>) {
        let selector = HashMap::from([(
            labels::NODE.to_string(),
            self.ctx.settings.node_name.clone(),
        )]);
        let mut previous: HashMap<String, String> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let started = std::time::Instant::now();
            let (sandboxes, containers) = match tokio::try_join!(
                self.ctx.cri.list_pod_sandbox(selector.clone()),
                self.ctx.cri.list_containers(selector.clone())
            ) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(error = %e, "relist failed");
                    continue;
                }
            };
            self.ctx
                .metrics
                .observe_relist(started.elapsed().as_secs_f64());
            let mut current: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for s in &sandboxes {
                if let Some(uid) = s.labels.get(labels::POD_UID) {
                    current
                        .entry(uid.clone())
                        .or_default()
                        .push(format!("s{}:{}", s.id, s.state));
                }
            }
            for c in &containers {
                if let Some(uid) = c.labels.get(labels::POD_UID) {
                    current
                        .entry(uid.clone())
                        .or_default()
                        .push(format!("c{}:{}", c.id, c.state));
                }
            }
            let mut fingerprints = HashMap::new();
            for (uid, mut parts) in current {
                parts.sort();
                fingerprints.insert(uid, parts.join(","));
            }
            for (uid, fp) in &fingerprints {
                if previous.get(uid) != Some(fp) {
                    self.poke(uid).await;
                }
            }
            previous = fingerprints;
            self.reap().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::needs_sync;
    use k8s_openapi::api::core::v1::{Pod, PodStatus};

    #[test]
    fn status_only_updates_need_no_sync() {
        let old: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "c", "image": "i:1"}]}
        }))
        .unwrap();
        let mut new = old.clone();
        new.metadata.resource_version = Some("2".into());
        new.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        assert!(!needs_sync(&old, &new));
        new.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
        assert!(needs_sync(&old, &new));
        let mut deleted = old.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(needs_sync(&old, &deleted));
    }
}
