//! Warning Events on Ingresses left out of the configuration, as ingress-nginx reports them
//! (Ingress status has only loadBalancer): `kubectl describe ingress` shows why. Sent in the
//! background: an Event that cannot be written never holds up a sync.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::model::Rejection;

pub const COMPONENT: &str = "keelson-ingress";

/// Records a Warning Event for `rejection` on `ing`.
pub fn warn(client: &kube::Client, ing: &Ingress, rejection: &Rejection) {
    let event = build(ing, rejection, Timestamp::now());
    let (ns, _) = &rejection.ingress;
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    tokio::spawn(async move {
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %e, "event not recorded");
        }
    });
}

/// The Event object. Pure.
pub fn build(ing: &Ingress, rejection: &Rejection, now: Timestamp) -> Event {
    let m = &ing.metadata;
    let (ns, name) = &rejection.ingress;
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("networking.k8s.io/v1".into()),
            kind: Some("Ingress".into()),
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..Default::default()
        },
        reason: Some(rejection.reason.to_string()),
        message: Some(rejection.message.clone()),
        type_: Some("Warning".into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(COMPONENT.into()),
        action: Some("Sync".into()),
        ..Default::default()
    }
}
