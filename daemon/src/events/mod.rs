//! One Event recorder for every Keelson component (controllers, scheduler, ingress, agent):
//! core/v1 Events (what Keelson's API server serves; `kubectl describe` shows them) with
//! `source` and `reportingComponent` set. Repeats are counted into one object and floods are
//! dropped, as upstream's recorder does (see `correlator`). Recording never blocks the caller:
//! Events go through a bounded queue to a background task, and a full queue or a failed write is
//! logged, not returned.

mod correlator;

pub use correlator::{Correlator, Decision, EventKey};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Events waiting to be written; beyond this, new ones are dropped (and logged).
const QUEUE: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who reports: `component` as upstream names it (`default-scheduler`, `deployment-controller`,
/// `kubelet`-like), and the host for node-bound reporters.
#[derive(Clone, Debug, Default)]
pub struct Reporter {
    pub component: String,
    pub host: Option<String>,
}

/// The reference to `obj` that Events carry.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let m = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        uid: m.uid.clone(),
        resource_version: m.resource_version.clone(),
        ..Default::default()
    }
}

/// Sends Events to the background writer. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Event>,
    reporter: Reporter,
    /// Events dropped so far because the queue was full (shared by every clone).
    dropped: Arc<AtomicU64>,
}

impl Recorder {
    /// Starts the background writer on the current Tokio runtime.
    pub fn new(client: kube::Client, reporter: Reporter) -> Recorder {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(write_events(client, rx));
        Recorder {
            tx,
            reporter,
            dropped: Arc::default(),
        }
    }

    /// The same writer, reporting as `component` (one controller manager runs many controllers,
    /// each named in its Events as upstream's are).
    pub fn reporting(&self, component: &str) -> Recorder {
        Recorder {
            tx: self.tx.clone(),
            dropped: self.dropped.clone(),
            reporter: Reporter {
                component: component.into(),
                host: self.reporter.host.clone(),
            },
        }
    }

    /// Records `reason: message` about `obj`.
    pub fn publish<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.publish_ref(reference(obj), type_, reason, message.into());
    }

    /// Records `reason: message` about the object `regarding` refers to (with its fieldPath,
    /// e.g. one container of a pod).
    pub fn publish_ref(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let event = build(
            regarding,
            type_,
            reason,
            message,
            &self.reporter,
            Timestamp::now(),
        );
        if self.tx.try_send(event).is_err() {
            // A burst (a scheduler binding thousands of Pods) drops thousands: log the 1st,
            // 2nd, 4th, 8th... and every 1000th drop, not each.
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() || dropped.is_multiple_of(1000) {
                tracing::warn!(
                    reason,
                    dropped,
                    "events dropped: the queue of events to write is full"
                );
            }
        }
    }
}

/// The Event object, named `<object>.<hex nanoseconds>` as upstream's. Pure.
pub fn build(
    regarding: ObjectReference,
    type_: EventType,
    reason: &str,
    message: String,
    reporter: &Reporter,
    now: Timestamp,
) -> Event {
    let object = regarding.name.clone().unwrap_or_default();
    // Cluster-scoped objects (Nodes) have their Events in `default`, as upstream.
    let namespace = regarding
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".into());
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{object}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: regarding,
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(type_.as_str().into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        reporting_component: Some(reporter.component.clone()),
        reporting_instance: Some(
            reporter
                .host
                .clone()
                .unwrap_or_else(|| reporter.component.clone()),
        ),
        source: Some(EventSource {
            component: Some(reporter.component.clone()),
            host: reporter.host.clone(),
        }),
        ..Default::default()
    }
}

/// What identifies a repeat of `e`.
pub fn key(e: &Event) -> EventKey {
    let o = &e.involved_object;
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    let source = e.source.clone().unwrap_or_default();
    EventKey {
        object: [
            s(&o.namespace),
            s(&o.kind),
            s(&o.name),
            s(&o.uid),
            s(&o.field_path),
        ],
        type_: s(&e.type_),
        reason: s(&e.reason),
        message: s(&e.message),
        component: s(&source.component),
        host: s(&source.host),
    }
}

/// The background writer: one Event at a time, in order, until every Recorder is dropped.
async fn write_events(client: kube::Client, mut rx: mpsc::Receiver<Event>) {
    let mut correlator = Correlator::default();
    while let Some(mut event) = rx.recv().await {
        let name = event.metadata.name.clone().unwrap_or_default();
        let ns = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(client.clone(), &ns);
        let now = tokio::time::Instant::now();
        let (res, key) = match correlator.observe(&key(&event), now, name.clone()) {
            Decision::Drop => {
                tracing::debug!(reason = ?event.reason, "event dropped: too many about one object");
                continue;
            }
            Decision::Create { key, message, .. } => {
                event.message = Some(message);
                (api.create(&PostParams::default(), &event).await, key)
            }
            Decision::Patch {
                name: old,
                count,
                key,
                message,
            } => {
                event.message = Some(message);
                let patch = serde_json::json!({
                    "count": count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                });
                let res = match api
                    .patch(&old, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    // Expired on the server (Events have a time to live): write it anew.
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        correlator.created(&key, name);
                        api.create(&PostParams::default(), &event).await
                    }
                    other => other,
                };
                (res, key)
            }
        };
        if let Err(e) = res {
            tracing::warn!(namespace = %ns, reason = ?event.reason, error = %e, "event not recorded");
            correlator.forget(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn a_node_event_lives_in_default_and_names_its_source() {
        let node = Node {
            metadata: kube::api::ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reporter = Reporter {
            component: "node-controller".into(),
            host: None,
        };
        let e = build(
            reference(&node),
            EventType::Normal,
            "RegisteredNode",
            "Node n1 event: Registered Node n1 in Controller".into(),
            &reporter,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.metadata.name.as_deref(), Some("n1.0"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(e.reporting_component.as_deref(), Some("node-controller"));
        assert_eq!(
            e.source.and_then(|s| s.component).as_deref(),
            Some("node-controller")
        );
        assert_eq!(e.count, Some(1));
    }
}
