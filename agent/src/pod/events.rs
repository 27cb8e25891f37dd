//! Pod events (Pulling, Pulled, Created, Started, Killing, BackOff, Unhealthy, Failed) as
//! core/v1 Events, so `kubectl describe pod` and `kubectl get events` tell what happened.
//! Written by the recorder every component shares (repeats counted into one Event, floods
//! dropped, never holding up a pod).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
pub use keelson_daemon::events::EventType as Kind;
use keelson_daemon::events::{reference, Reporter};

/// The kubelet's reporting component, which `kubectl describe` shows as the Event's source.
pub const COMPONENT: &str = "kubelet";

#[derive(Clone)]
pub struct Recorder {
    inner: keelson_daemon::events::Recorder,
}

impl Recorder {
    /// Starts the writer on the current Tokio runtime; `node` is the Events' source host.
    pub fn new(client: kube::Client, node: String) -> Self {
        let reporter = Reporter {
            component: COMPONENT.into(),
            host: Some(node),
        };
        Recorder {
            inner: keelson_daemon::events::Recorder::new(client, reporter),
        }
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
        self.inner
            .publish_ref(regarding(pod, container), kind, reason, message);
    }
}

/// The pod, or one of its containers as upstream's fieldPath names it. Pure.
pub fn regarding(pod: &Pod, container: Option<&str>) -> ObjectReference {
    ObjectReference {
        field_path: container.map(|c| format!("spec.containers{{{c}}}")),
        ..reference(pod)
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
        let r = regarding(&pod, Some("app"));
        assert_eq!(r.kind.as_deref(), Some("Pod"));
        assert_eq!(r.namespace.as_deref(), Some("shop"));
        assert_eq!(r.uid.as_deref(), Some("u1"));
        assert_eq!(r.field_path.as_deref(), Some("spec.containers{app}"));
    }
}
