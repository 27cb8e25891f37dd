//! Report: what a sync found, told once per change. Events for waiting containers and failed
//! readiness, the pod start metric, and the status written to the API.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

use super::{pod_key, SyncError};
use crate::conditions;
use crate::pod::context::Context;
use crate::pod::decide::Waiting;
use crate::pod::events::Kind;
use crate::pod::observed::{ObservedPod, RunState};
use crate::pod::probe::{self, ProbeTable};
use crate::pod::security::Rejection;

/// What one sync found, besides the status computed from it.
pub struct Report<'a> {
    pub pod: &'a Pod,
    pub observed: &'a ObservedPod,
    /// Containers that wait, and why, by name.
    pub waiting: &'a BTreeMap<String, Waiting>,
    pub probes: &'a ProbeTable,
}

/// What was told already, so each event is sent, the start counted and a status written once.
#[derive(Default)]
pub struct Reported {
    status: Option<PodStatus>,
    /// Set once every container ran: whether that start happened under this agent (true) or
    /// the pod was adopted already running (false).
    started: Option<bool>,
    /// "reason|message" of the waiting containers, by name.
    waiting: BTreeMap<String, String>,
    /// Running containers announced as unready.
    unready: HashSet<String>,
    /// "reason|message" of the node's refusal, once announced.
    rejected: Option<String>,
}

impl Reported {
    pub async fn report(
        &mut self,
        ctx: &Context,
        report: &Report<'_>,
        status: PodStatus,
    ) -> Result<(), SyncError> {
        self.announce_waiting(ctx, report);
        self.announce_unready(ctx, report);
        self.record_start(ctx, report.pod, &status);
        self.write_status(ctx, report.pod, status).await
    }

    /// A pod the node refuses (`admit`) or ends (its active deadline, an eviction): a Warning
    /// Event once, and the status the kubelet gives it: `base` (its stopped containers, for a
    /// pod that ran), Failed, the reason and `status_message`.
    pub async fn reject(
        &mut self,
        ctx: &Context,
        pod: &Pod,
        rejection: &Rejection,
        status_message: String,
        base: PodStatus,
    ) -> Result<(), SyncError> {
        let key = format!("{}|{}", rejection.reason, rejection.message);
        let live = pod.status.as_ref();
        let recorded = live.is_some_and(|s| {
            s.phase.as_deref() == Some("Failed")
                && s.reason.as_deref() == Some(rejection.reason)
                && s.message.as_ref() == Some(&status_message)
        });
        // Told once: not again by a new worker (an agent restarted) for a status that has it.
        if self.rejected.as_ref() != Some(&key) && !recorded {
            tracing::warn!(pod = %pod_key(pod), reason = rejection.reason, "{}", rejection.message);
            let message = rejection.message.clone();
            ctx.events
                .pod(pod, None, Kind::Warning, rejection.reason, message);
        }
        self.rejected = Some(key);
        if recorded {
            return Ok(());
        }
        let mut conditions = base.conditions.unwrap_or_default();
        // An eviction or a node shutdown says so in a condition too, as the kubelet's
        // (PodDisruptionConditions).
        let disrupted = [
            crate::pod::local_storage::EVICTED,
            crate::shutdown::plan::REASON,
        ];
        if disrupted.contains(&rejection.reason) {
            conditions.push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("TerminationByKubelet".into()),
                message: Some(rejection.message.clone()),
                last_transition_time: Some(Time(Timestamp::now())),
                ..Default::default()
            });
        }
        let status = PodStatus {
            phase: Some("Failed".into()),
            reason: Some(rejection.reason.into()),
            message: Some(status_message),
            host_ip: Some(ctx.host_ip.clone()),
            conditions: (!conditions.is_empty()).then_some(conditions),
            ..base
        };
        self.write_status(ctx, pod, status).await
    }

    /// Whether the pod's containers all ran once, and if so whether this agent started them.
    pub fn started(&self) -> Option<bool> {
        self.started
    }

    /// BackOff and Failed events for waiting containers, once per reason and message.
    fn announce_waiting(&mut self, ctx: &Context, report: &Report<'_>) {
        let pod = report.pod;
        for (name, w) in report.waiting {
            let key = format!("{}|{}", w.reason, w.message);
            if self.waiting.get(name) == Some(&key) {
                continue;
            }
            self.waiting.insert(name.clone(), key);
            let (kind, reason, message) = match w.reason.as_str() {
                "CrashLoopBackOff" => (
                    Kind::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {name} in pod {}",
                        pod_key(pod)
                    ),
                ),
                "ImagePullBackOff" => (Kind::Normal, "BackOff", w.message.clone()),
                "ContainerCreating" | "PodInitializing" => continue,
                other => (
                    Kind::Warning,
                    "Failed",
                    format!("Error: {other}: {}", w.message),
                ),
            };
            ctx.events.pod(pod, Some(name), kind, reason, message);
        }
        self.waiting
            .retain(|name, _| report.waiting.contains_key(name));
    }

    /// An Unhealthy event when a running container turns unready, once until it is ready again.
    fn announce_unready(&mut self, ctx: &Context, report: &Report<'_>) {
        let table = report.probes;
        for c in report
            .observed
            .containers
            .iter()
            .filter(|c| c.state == RunState::Running)
        {
            let unready = table.view.ready.get(&c.id) == Some(&false);
            if !unready {
                self.unready.remove(&c.id);
                continue;
            }
            if !self.unready.insert(c.id.clone()) {
                continue;
            }
            let kind = probe::Kind::Readiness.name();
            if let Some(why) = table.last_failure.get(&(c.id.clone(), kind)) {
                let message = format!("Readiness probe failed: {why}");
                ctx.events.pod(
                    report.pod,
                    Some(&c.name),
                    Kind::Warning,
                    "Unhealthy",
                    message,
                );
            }
        }
    }

    /// The pod start duration, once all its containers run for the first time.
    fn record_start(&mut self, ctx: &Context, pod: &Pod, status: &PodStatus) {
        if self.started.is_some() {
            return;
        }
        let all_running = status.container_statuses.as_ref().is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
        if !all_running {
            return;
        }
        // Pods adopted after a restart were started long ago: only fresh starts count.
        let fresh = pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running");
        self.started = Some(fresh);
        if fresh {
            if let Some(created) = &pod.metadata.creation_timestamp {
                let secs = Timestamp::now().duration_since(created.0).as_secs_f64();
                ctx.metrics.observe_pod_start(secs.max(0.0));
            }
        }
    }

    /// Writes the status unless the API (or the last write) has it already. The last write counts
    /// only while the API's conditions still agree with it: a watched copy may lag behind our own
    /// write, but conditions that someone else changed (node lifecycle marks a lost node's pods not
    /// Ready) are corrected at once.
    async fn write_status(
        &mut self,
        ctx: &Context,
        pod: &Pod,
        status: PodStatus,
    ) -> Result<(), SyncError> {
        let live = pod.status.as_ref().map(crate::pod::status::as_written);
        let written = self.status.as_ref() == Some(&status)
            && conditions::states(live.as_ref().and_then(|s| s.conditions.as_deref()))
                == conditions::states(status.conditions.as_deref());
        if live.as_ref() == Some(&status) || written {
            return Ok(());
        }
        let api: Api<Pod> = Api::namespaced(
            ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        // A strategic merge, so that conditions others own stay; the address lists, merged by
        // ip otherwise, are replaced (a new sandbox has a new address).
        let mut body = serde_json::to_value(&status).unwrap_or_default();
        for list in ["podIPs", "hostIPs"] {
            let items = body.get_mut(list).and_then(serde_json::Value::as_array_mut);
            if let Some(items) = items {
                items.push(serde_json::json!({ "$patch": "replace" }));
            }
        }
        let patch = serde_json::json!({ "status": body });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                self.status = Some(status);
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(SyncError::Api {
                action: "writing status of",
                pod: pod_key(pod),
                source,
            }),
        }
    }
}
