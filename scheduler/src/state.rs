//! The scheduler's in-memory view and its actions: which Pods wait, which node each goes to, the
//! Binding sent for it, preemption when none fits, and the "unschedulable" condition.

use k8s_openapi::api::core::v1::Pod;
use keelson_daemon::events::{EventType, Recorder, Reporter};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::config::Profile;
use crate::framework::{self, Cycle, Unfit};
use crate::metrics::{self, Timer};
use crate::preemption::{self, Budget};
use crate::view::{Nominations, PodCache, Stores, View};
use crate::volumes::{self, PodVolumes};
use crate::{evict, gated, pending, unresolvable_message, NodeInfo, PodInfo};

pub(crate) struct State {
    client: kube::Client,
    stores: Stores,
    profiles: Vec<Profile>,
    cache: PodCache,
    /// Pods bound (or being bound) by this scheduler that the Pod store does not show yet.
    assumed: Mutex<HashMap<String, (Arc<PodInfo>, String)>>,
    /// Preemption victims deleted by this scheduler that the Pod store does not show
    /// terminating yet: their room is already free (a terminating Pod counts on no node).
    evicted: Mutex<HashSet<String>>,
    /// Node per Pod nominated by this scheduler's preemption, until the Pod store shows it
    /// in status.nominatedNodeName (or the Pod is no longer pending).
    nominated: Mutex<HashMap<String, String>>,
    /// Per Pod: the last "unschedulable" condition message written (so it is not written
    /// again) and when the last FailedScheduling Event was.
    reported: Mutex<HashMap<String, Reported>>,
    events: Recorder,
    binds: Arc<Semaphore>,
    /// Where the next Pod's search over the nodes starts (upstream's nextStartNodeIndex).
    next_start: AtomicUsize,
    /// Cycles so far: one in ten has its plugins timed (upstream's pluginMetricsSamplePercent).
    cycles: AtomicUsize,
    metrics: metrics::Metrics,
}

impl State {
    /// At most this many Binding requests are in flight at once.
    const CONCURRENT_BINDS: usize = 64;
    /// Upstream's longest back-off between attempts at an unschedulable Pod.
    const FAILED_EVENT_EVERY: Duration = Duration::from_secs(10);

    pub(crate) fn new(
        client: kube::Client,
        stores: Stores,
        metrics: metrics::Metrics,
        profiles: Vec<Profile>,
    ) -> State {
        State {
            client: client.clone(),
            stores,
            profiles,
            cache: PodCache::default(),
            assumed: Mutex::new(HashMap::new()),
            evicted: Mutex::new(HashSet::new()),
            nominated: Mutex::new(HashMap::new()),
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
            cycles: AtomicUsize::new(0),
            metrics,
        }
    }

    fn view(&self) -> View {
        let mut infos: Vec<NodeInfo> = self
            .stores
            .nodes
            .state()
            .into_iter()
            .map(NodeInfo::new)
            .collect();
        let index: HashMap<String, usize> = infos
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut assumed = self.assumed.lock().unwrap_or_else(|p| p.into_inner());
        let pods = self.stores.pods.state();
        // Forget assumptions the store now reflects (bound, or gone).
        let still_pending: HashSet<String> = pods
            .iter()
            .filter(|p| pending(p, &self.profiles))
            .filter_map(|p| p.uid())
            .collect();
        assumed.retain(|uid, _| still_pending.contains(uid));
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| still_pending.contains(uid));
        self.nominated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| still_pending.contains(uid));
        let mut evicted = self.evicted.lock().unwrap_or_else(|p| p.into_inner());
        if !evicted.is_empty() {
            let running: HashSet<String> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.uid())
                .collect();
            evicted.retain(|uid| running.contains(uid));
        }
        let all: HashSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
        self.cache.retain(&all);
        for p in pods.iter().filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && (evicted.is_empty() || !p.uid().is_some_and(|u| evicted.contains(&u)))
        }) {
            if let Some(i) = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .and_then(|n| index.get(n))
            {
                infos[*i].add(&self.cache.get(p));
            }
        }
        for (pod, node) in assumed.values() {
            if let Some(i) = index.get(node) {
                infos[*i].add(pod);
            }
        }
        View::new(infos, index)
    }

    pub(crate) async fn schedule_pending(self: &Arc<Self>) {
        // The view first, then the queue from a later look at the store: a Pod bound since the
        // view's look is still counted there (as assumed) and is no longer queued. The other
        // way round, a Pod whose binding arrived between the two looks was counted on its node
        // and queued again, placed a second time in this pass's view (its second binding then
        // failed), and that phantom pushed the next Pods off its node: an uneven spread.
        let mut view = self.view();
        let cluster = self.stores.cluster(&view.infos);
        let mut queue: Vec<Arc<PodInfo>> = self
            .stores
            .pods
            .state()
            .into_iter()
            .filter(|p| pending(p, &self.profiles))
            .map(|p| self.cache.get(&p))
            .collect();
        queue.sort_by(|a, b| preemption::queue_order(&a.pod, &b.pod));
        // Read only when a Pod fits nowhere: most passes never preempt.
        let mut budgets: Option<Vec<Budget>> = None;
        let snapshot = volumes::Snapshot {
            claims: self.stores.claims.state(),
            volumes: self.stores.volumes.state(),
            classes: self.stores.classes.state(),
        };
        let mut nominations = self.nominations(&queue, &view);
        for pod in queue {
            let uid = pod.pod.uid().unwrap_or_default();
            if self
                .assumed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&uid)
            {
                continue;
            }
            let profile = self.profile_of(&pod.pod);
            if profile.gates && gated(&pod.pod) {
                // Upstream's PreEnqueue: the Pod is not tried until its last gate is removed;
                // the API server gave it PodScheduled=False (SchedulingGated) at creation.
                continue;
            }
            nominations.hold_for(&pod, &mut view);
            let vols = match volumes::resolve(&pod.pod, &snapshot) {
                Ok(v) => v,
                Err(why) => {
                    let message = unresolvable_message(view.infos.len(), &why);
                    self.unschedulable(&pod.pod, message).await;
                    continue;
                }
            };
            let started = std::time::Instant::now();
            let sampled = self
                .cycles
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(10);
            let timer = Timer::new(&self.metrics, &profile.scheduler_name, sampled);
            let cycle = Cycle::new(
                pod.clone(),
                profile,
                &cluster,
                &view.infos,
                &mut view.kept,
                &vols,
                timer,
            );
            let start = self.next_start.load(Ordering::Relaxed);
            let (picked, looked) = framework::schedule_one(&cycle, &cluster, &view.infos, start);
            let next = (start + looked) % view.infos.len().max(1);
            self.next_start.store(next, Ordering::Relaxed);
            let result = if picked.is_ok() {
                "scheduled"
            } else {
                "unschedulable"
            };
            self.observe_attempt(result, &profile.scheduler_name, started);
            match picked {
                Ok(i) => {
                    // Its PreScore states are kept for its template, before the placement
                    // updates them; its plugin samples are observed now; its borrows end.
                    cycle.keep(&mut view.kept);
                    let node = view.infos[i].name.clone();
                    view.place(i, &pod);
                    self.assumed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(uid.clone(), (pod.clone(), node.clone()));
                    let me = self.clone();
                    let permit = self.binds.clone().acquire_owned().await;
                    tokio::spawn(async move {
                        let _permit = permit;
                        if me.bind_volumes(&pod.pod, &node, &vols).await {
                            me.bind(&pod.pod, &node).await;
                        }
                    });
                }
                Err(unfit) => {
                    let budgets = budgets.get_or_insert_with(|| {
                        let all = self.stores.budgets.state();
                        all.iter().filter_map(|b| Budget::new(b)).collect()
                    });
                    let message = self.preempt(&cycle, &unfit, budgets, &mut view).await;
                    self.unschedulable(&pod.pod, message).await
                }
            }
        }
    }

    /// The profile named by the Pod's schedulerName (pending Pods name one of them).
    fn profile_of(&self, pod: &Pod) -> &Profile {
        let name = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        let name = name.unwrap_or(crate::SCHEDULER_NAME);
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == name)
            .unwrap_or(&self.profiles[0])
    }

    fn observe_attempt(&self, result: &str, profile: &str, started: std::time::Instant) {
        let labels = vec![
            ("result", result.to_string()),
            ("profile", profile.to_string()),
        ];
        self.metrics.attempts.get_or_create(&labels).inc();
        self.metrics
            .attempt_duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// The nominated node of each pending Pod not being bound: set by this scheduler just
    /// now, or as the Pod store shows it.
    fn nominations(&self, queue: &[Arc<PodInfo>], view: &View) -> Nominations {
        let mine = self
            .nominated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let assumed = self.assumed.lock().unwrap_or_else(|p| p.into_inner());
        Nominations::new(queue, |p| {
            let stored = p
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_ref())
                .filter(|n| !n.is_empty());
            if stored.is_none() && mine.is_empty() {
                return None;
            }
            let uid = p.uid()?;
            if assumed.contains_key(&uid) {
                return None;
            }
            let node = mine.get(&uid).or(stored)?;
            view.index.get(node).copied()
        })
    }

    /// PostFilter: preemption for a Pod that fits nowhere. Evicts the victims on the chosen
    /// node and holds its room for the Pod in `view`, so that no lower-priority Pod takes it
    /// before the Pod is tried again. Returns the FitError text to report.
    async fn preempt(
        &self,
        cycle: &Cycle<'_>,
        unfit: &Unfit,
        budgets: &[Budget],
        view: &mut View,
    ) -> String {
        let pod = &cycle.pod;
        if unfit.nodes == 0 || !cycle.profile.preemption {
            return unfit.message();
        }
        self.metrics.preemption_attempts.inc();
        if let Some(why) = preemption::not_eligible(&pod.pod) {
            return unfit.message_with(why);
        }
        let fits = |i: usize, trial: &NodeInfo| cycle.fits_without(&view.infos[i], trial);
        let found = preemption::find(&pod.pod, &unfit.could_help, &view.infos, budgets, &fits);
        let Some((i, victims)) = found else {
            // Upstream clears a nomination that no longer holds, so the Pod holds no room.
            self.nominate(&pod.pod, None).await;
            return unfit.message();
        };
        let node = view.infos[i].name.clone();
        self.metrics
            .preemption_victims
            .observe(victims.pods.len() as f64);
        tracing::info!(pod = %pod.pod.name_any(), node, victims = victims.pods.len(), "preempting");
        self.evicted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(victims.pods.iter().filter_map(|v| v.pod.uid()));
        self.nominate(&pod.pod, Some(&node)).await;
        let targets: Vec<Arc<Pod>> = victims.pods.iter().map(|v| v.pod.clone()).collect();
        let failed = evict::preempt(&self.client, &self.events, &pod.pod, &node, &targets).await;
        let mut evicted = self.evicted.lock().unwrap_or_else(|p| p.into_inner());
        for v in &victims.pods {
            let uid = v.pod.uid().unwrap_or_default();
            if failed.contains(&uid) {
                evicted.remove(&uid);
            } else {
                view.unplace(i, v);
            }
        }
        view.place(i, pod);
        unfit.message_with("")
    }

    /// Sets (or clears) the Pod's status.nominatedNodeName, remembered until the store shows it.
    async fn nominate(&self, pod: &Pod, node: Option<&str>) {
        let uid = pod.uid().unwrap_or_default();
        let stored = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref());
        {
            let mut mine = self.nominated.lock().unwrap_or_else(|p| p.into_inner());
            let current = mine.get(&uid).map(String::as_str).or(stored);
            if current.filter(|n| !n.is_empty()) == node {
                return;
            }
            match node {
                Some(n) => mine.insert(uid, n.to_string()),
                None => mine.remove(&uid),
            };
        }
        evict::nominate(&self.client, pod, node).await;
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
