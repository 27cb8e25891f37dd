//! The scheduler's in-memory view and its actions: which Pods wait, which node each goes to, the
//! Binding sent for it, and the "unschedulable" condition when none fits.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use keelson_daemon::events::{EventType, Recorder, Reporter};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::volumes::{self, PodVolumes};
use crate::{metrics, pending, pick_from, unresolvable_message, NodeInfo};

/// The watches volume binding reads.
pub(crate) struct VolumeStores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
}

pub(crate) struct State {
    client: kube::Client,
    pods: Store<Pod>,
    nodes: Store<Node>,
    storage: VolumeStores,
    /// Pods bound (or being bound) by this scheduler that the Pod store does not show yet.
    assumed: Mutex<HashMap<String, (Pod, String)>>,
    /// Per Pod: the last "unschedulable" condition message written (so it is not written
    /// again) and when the last FailedScheduling Event was.
    reported: Mutex<HashMap<String, Reported>>,
    events: Recorder,
    binds: Arc<Semaphore>,
    /// Where the next Pod's search over the nodes starts (upstream's nextStartNodeIndex).
    next_start: AtomicUsize,
    metrics: metrics::Metrics,
}

impl State {
    /// At most this many Binding requests are in flight at once.
    const CONCURRENT_BINDS: usize = 32;
    /// Upstream's longest back-off between attempts at an unschedulable Pod.
    const FAILED_EVENT_EVERY: Duration = Duration::from_secs(10);

    pub(crate) fn new(
        client: kube::Client,
        pods: Store<Pod>,
        nodes: Store<Node>,
        storage: VolumeStores,
        metrics: metrics::Metrics,
    ) -> State {
        State {
            client: client.clone(),
            pods,
            nodes,
            storage,
            assumed: Mutex::new(HashMap::new()),
            reported: Mutex::new(HashMap::new()),
            events: Recorder::new(
                client.clone(),
                Reporter {
                    component: crate::SCHEDULER_NAME.into(),
                    host: None,
                },
            ),
            binds: Arc::new(Semaphore::new(Self::CONCURRENT_BINDS)),
            next_start: AtomicUsize::new(0),
            metrics,
        }
    }

    fn view(&self) -> Vec<NodeInfo> {
        let mut infos: Vec<NodeInfo> = self
            .nodes
            .state()
            .iter()
            .map(|n| NodeInfo::new((**n).clone()))
            .collect();
        let index: HashMap<String, usize> = infos
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node.name_any(), i))
            .collect();
        let mut assumed = self.assumed.lock().unwrap_or_else(|p| p.into_inner());
        let pods = self.pods.state();
        // Forget assumptions the store now reflects (bound, or gone).
        let still_pending: HashSet<String> = pods
            .iter()
            .filter(|p| pending(p))
            .filter_map(|p| p.uid())
            .collect();
        assumed.retain(|uid, _| still_pending.contains(uid));
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| still_pending.contains(uid));
        for p in pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            if let Some(i) = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .and_then(|n| index.get(n))
            {
                infos[*i].add(p);
            }
        }
        for (pod, node) in assumed.values() {
            if let Some(i) = index.get(node) {
                infos[*i].add(pod);
            }
        }
        infos
    }

    pub(crate) async fn schedule_pending(self: &Arc<Self>) {
        let mut queue: Vec<Arc<Pod>> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| pending(p))
            .collect();
        queue.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let mut infos = self.view();
        let snapshot = volumes::Snapshot {
            claims: self.storage.claims.state(),
            volumes: self.storage.volumes.state(),
            classes: self.storage.classes.state(),
        };
        for pod in queue {
            let uid = pod.uid().unwrap_or_default();
            if self
                .assumed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&uid)
            {
                continue;
            }
            let vols = match volumes::resolve(&pod, &snapshot) {
                Ok(v) => v,
                Err(why) => {
                    let message = unresolvable_message(infos.len(), &why);
                    self.unschedulable(&pod, message).await;
                    continue;
                }
            };
            let start = self.next_start.load(Ordering::Relaxed);
            let (picked, looked) = pick_from(&pod, &infos, &vols, start);
            let next = (start + looked) % infos.len().max(1);
            self.next_start.store(next, Ordering::Relaxed);
            match picked {
                Ok(i) => {
                    let node = infos[i].node.name_any();
                    infos[i].add(&pod);
                    self.assumed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(uid.clone(), ((*pod).clone(), node.clone()));
                    let me = self.clone();
                    let permit = self.binds.clone().acquire_owned().await;
                    tokio::spawn(async move {
                        let _permit = permit;
                        if me.bind_volumes(&pod, &node, &vols).await {
                            me.bind(&pod, &node).await;
                        }
                    });
                }
                Err(message) => self.unschedulable(&pod, message).await,
            }
        }
    }

    /// PreBind: each WaitForFirstConsumer claim gets the chosen node (selected-node), then the
    /// Pod waits until the binder has bound them all. False (the Pod is tried again later)
    /// when that fails or takes too long.
    async fn bind_volumes(&self, pod: &Pod, node: &str, vols: &PodVolumes) -> bool {
        let ok = match volumes::bind_claims(&self.client, node, vols).await {
            Ok(()) => true,
            Err(e) => {
                tracing::info!(pod = %pod.name_any(), node, error = %e, "claims not bound yet; will retry");
                false
            }
        };
        if !ok {
            self.assumed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&pod.uid().unwrap_or_default());
        }
        ok
    }

    async fn bind(&self, pod: &Pod, node: &str) {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": { "name": pod.name_any(), "uid": pod.uid() },
            "target": { "apiVersion": "v1", "kind": "Node", "name": node },
        });
        let res: Result<serde_json::Value, _> = api
            .create_subresource("binding", &pod.name_any(), &PostParams::default(), &body)
            .await;
        match res {
            Ok(_) => {
                self.metrics.scheduled.inc();
                tracing::debug!(pod = %pod.name_any(), node, "bound");
                let message = format!(
                    "Successfully assigned {}/{} to {node}",
                    pod.namespace().unwrap_or_default(),
                    pod.name_any()
                );
                self.events
                    .publish(pod, EventType::Normal, "Scheduled", message);
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), node, error = %e, "binding failed; will retry");
                self.assumed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&pod.uid().unwrap_or_default());
            }
        }
    }

    /// A FailedScheduling Event for each attempt (at most one per FAILED_EVENT_EVERY per Pod,
    /// as upstream's back-off spaces attempts; repeats are counted into one Event by the
    /// recorder), and PodScheduled=False (reason Unschedulable) once per message.
    async fn unschedulable(&self, pod: &Pod, message: String) {
        let uid = pod.uid().unwrap_or_default();
        let (event_due, condition_due) = {
            let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
            let r = reported.get(&uid);
            let condition_due = r.is_none_or(|r| r.condition != message);
            let event_due =
                condition_due || r.is_none_or(|r| r.event_at.elapsed() >= Self::FAILED_EVENT_EVERY);
            if event_due {
                let condition = r.map(|r| r.condition.clone()).unwrap_or_default();
                reported.insert(
                    uid.clone(),
                    Reported {
                        condition,
                        event_at: Instant::now(),
                    },
                );
            }
            (event_due, condition_due)
        };
        if event_due {
            self.events
                .publish(pod, EventType::Warning, "FailedScheduling", message.clone());
        }
        if !condition_due {
            return;
        }
        self.metrics.unschedulable.inc();
        tracing::info!(pod = %pod.name_any(), %message, "unschedulable");
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let patch = serde_json::json!({ "status": { "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        }]}});
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => {
                if let Some(r) = self
                    .reported
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_mut(&uid)
                {
                    r.condition = message;
                }
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), error = %e, "could not report unschedulable")
            }
        }
    }
}

/// What the scheduler last told about an unschedulable Pod.
pub(crate) struct Reported {
    condition: String,
    event_at: Instant,
}
