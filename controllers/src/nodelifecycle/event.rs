//! core/v1 Events about the objects the controller manager acts on, so `kubectl describe` and
//! `kubectl get events` tell why a pod went. Written in the background: an Event that cannot be
//! written never holds up the work it describes.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

/// The Event saying `reason: message` about `obj`, reported by `component`. Pure.
pub fn build<K>(obj: &K, kind: &str, reason: &str, message: String, component: &str) -> Event
where
    K: Resource<DynamicType = ()>,
{
    let now = Timestamp::now();
    let name = format!("{}.{:x}", obj.name_any(), now.as_nanosecond());
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            namespace: Some(obj.namespace().unwrap_or_else(|| "default".into())),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: obj.meta().name.clone(),
            namespace: obj.namespace(),
            uid: obj.meta().uid.clone(),
            resource_version: obj.meta().resource_version.clone(),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some(kind.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        reporting_component: Some(component.into()),
        reporting_instance: Some(component.into()),
        action: Some(reason.into()),
        source: Some(EventSource {
            component: Some(component.into()),
            host: None,
        }),
        ..Default::default()
    }
}

/// Writes `event` in the background.
pub fn record(client: &kube::Client, event: Event) {
    let ns = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &ns);
    tokio::spawn(async move {
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %e, "event not recorded");
        }
    });
}
