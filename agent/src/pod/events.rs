//! Pod events (Pulling, Pulled, Created, Started, Killing, BackOff, Unhealthy, Failed) as
//! core/v1 Events, so `kubectl describe pod` and `kubectl get events` tell what happened.
//! Sent in the background: an event that cannot be written never holds up a pod.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

pub const COMPONENT: &str = "keelson-agent";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Warning,
}

#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    node: String,
}

impl Recorder {
    pub fn new(client: kube::Client, node: String) -> Self {
        Recorder { client, node }
    }

    /// Records an event about the pod (or one of its containers, when `container` is given).
    pub fn pod(
        &self,
        pod: &Pod,
        container: Option<&str>,
        kind: Kind,
        reason: &str,
        message: String,
    ) {
        let event = build(pod, container, kind, reason, message, &self.node);
        let api: Api<Event> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        });
    }
}

/// The Event object. Pure.
pub fn build(
    pod: &Pod,
    container: Option<&str>,
    kind: Kind,
    reason: &str,
    message: String,
    node: &str,
) -> Event {
    let now = Timestamp::now();
    let m = &pod.metadata;
    let name = format!(
        "{}.{:x}",
        m.name.as_deref().unwrap_or("pod"),
        now.as_nanosecond()
    );
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            namespace: m.namespace.clone(),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            field_path: container.map(|c| format!("spec.containers{{{c}}}")),
        },
        reason: Some(reason.to_string()),
        message: Some(message),
        type_: Some(match kind {
            Kind::Normal => "Normal".into(),
            Kind::Warning => "Warning".into(),
        }),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(node.to_string()),
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.to_string()),
        action: Some(reason.to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_the_pod_and_container() {
        let pod = Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = build(
            &pod,
            Some("app"),
            Kind::Warning,
            "BackOff",
            "back-off".into(),
            "node-a",
        );
        assert!(e
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("web.")));
        assert_eq!(e.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
        assert_eq!(
            e.involved_object.field_path.as_deref(),
            Some("spec.containers{app}")
        );
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.source.and_then(|s| s.host).as_deref(), Some("node-a"));
    }
}
