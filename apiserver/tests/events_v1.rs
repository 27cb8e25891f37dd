//! events.k8s.io/v1 beside core/v1, in one storage as upstream's: kube-rs's event Recorder
//! (which writes events.k8s.io/v1) publishes an event and its repeat (a merge patch adding a
//! series), and the same object is read through both groups, by kubectl and by a kube-rs watch.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventV1;
use keelson_testing::Apiserver;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::Value;

fn items(json: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(json).expect("json");
    v["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn kube_rs_recorder_publishes_through_events_k8s_io_read_in_both_groups() {
    let api = Apiserver::start();
    api.kubectl_ok(&["create", "configmap", "watched", "--from-literal=a=b"]);
    let uid = api.jsonpath_ok(&["configmap", "watched"], "{.metadata.uid}");
    let client = api.client().await;
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("watched".into()),
        namespace: Some("default".into()),
        uid: Some(uid),
        ..Default::default()
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "keelson-test".into(),
            instance: Some("keelson-test-1".into()),
        },
    );
    let event = Event {
        type_: EventType::Warning,
        reason: "Checked".into(),
        note: Some("looked at it".into()),
        action: "Check".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.expect("publish");
    // The repeat is a merge patch of the whole events.k8s.io object with a series.
    recorder
        .publish(&event, &reference)
        .await
        .expect("publish the repeat");

    let new = items(&api.kubectl_ok(&["get", "events.v1.events.k8s.io", "-o", "json"]));
    assert_eq!(new.len(), 1, "{new:?}");
    let e = &new[0];
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["note"], "looked at it");
    assert_eq!(e["regarding"]["name"], "watched");
    assert_eq!(e["reportingController"], "keelson-test");
    assert_eq!(e["series"]["count"], 2, "{e}");
    assert!(
        e.get("message").is_none() && e.get("involvedObject").is_none(),
        "{e}"
    );

    let core = items(&api.kubectl_ok(&["get", "events", "-o", "json"]));
    assert_eq!(core.len(), 1, "{core:?}");
    let c = &core[0];
    assert_eq!(
        c["metadata"]["uid"], e["metadata"]["uid"],
        "two objects, not one"
    );
    assert_eq!(c["apiVersion"], "v1");
    assert_eq!(c["message"], "looked at it");
    assert_eq!(c["involvedObject"]["name"], "watched");
    assert_eq!(c["reportingComponent"], "keelson-test");
    assert_eq!(c["series"]["count"], 2);

    // kubectl's table through events.k8s.io, and describe of the object, show it.
    let table = api.kubectl_ok(&["get", "events.events.k8s.io"]);
    assert!(
        table.contains("Checked") && table.contains("looked at it"),
        "{table}"
    );
    // Field selectors name events.k8s.io's fields.
    let by_regarding = |name: &str| {
        api.kubectl_ok(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            &format!("regarding.name={name}"),
            "-o",
            "name",
        ])
    };
    assert_eq!(by_regarding("watched").lines().count(), 1);
    assert_eq!(by_regarding("other").lines().count(), 0);
    let described = api.kubectl_ok(&["describe", "configmap", "watched"]);
    assert!(described.contains("looked at it"), "{described}");

    // A watch through events.k8s.io gets the object in that form.
    let events: Api<EventV1> = Api::namespaced(client, "default");
    let first = watcher(events, watcher::Config::default())
        .applied_objects()
        .boxed()
        .next()
        .await
        .expect("an event")
        .expect("a watched event");
    assert_eq!(first.note.as_deref(), Some("looked at it"));
    assert_eq!(first.series.map(|s| s.count), Some(2));
}
