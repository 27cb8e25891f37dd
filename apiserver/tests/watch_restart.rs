//! A kube-rs watcher + reflector keeps an exact copy of the pods across server restarts:
//! it resumes without a relist when the history covers the gap, and relists after a 410.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use keelson_testing::Apiserver;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Retries a failed watch after a fixed 3 s, so writes made right after a restart land
/// before the watcher comes back.
struct SlowRetry;

impl Iterator for SlowRetry {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_secs(3))
    }
}

impl kube::runtime::utils::Backoff for SlowRetry {
    fn reset(&mut self) {}
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": { "app": "w" } },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] },
    }))
    .unwrap()
}

fn snapshot(store: &Store<Pod>) -> BTreeMap<String, String> {
    store
        .state()
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap(),
                p.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect()
}

/// LISTs this test makes itself, to tell them from the watcher's.
static OWN_LISTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

async fn server_state(api: &Api<Pod>) -> BTreeMap<String, String> {
    OWN_LISTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap(),
                p.metadata.resource_version.unwrap(),
            )
        })
        .collect()
}

async fn wait_in_sync(store: &Store<Pod>, api: &Api<Pod>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let want = server_state(api).await;
        if snapshot(store) == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "reflector never caught up: have {:?}, want {want:?}",
            snapshot(store)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn changes(api: &Api<Pod>, round: usize) {
    for i in 0..3 {
        api.create(&PostParams::default(), &pod(&format!("r{round}-{i}")))
            .await
            .unwrap();
    }
    let label = serde_json::json!({ "metadata": { "labels": { "round": round.to_string() } } });
    api.patch(
        &format!("r{round}-0"),
        &PatchParams::default(),
        &Patch::Merge(&label),
    )
    .await
    .unwrap();
    api.delete(&format!("r{round}-1"), &DeleteParams::default())
        .await
        .unwrap();
}

const LISTS: &str = "apiserver_request_total{verb=\"LIST\",resource=\"pods\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_survives_restarts() {
    let mut server = Apiserver::start();
    let client = server.client().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .backoff(SlowRetry)
        .touched_objects();
    let driver = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    changes(&api, 0).await;
    wait_in_sync(&reader, &api).await;

    // History covers the restart: the watch resumes from its resourceVersion, no LIST.
    server.restart();
    OWN_LISTS.store(0, std::sync::atomic::Ordering::SeqCst);
    changes(&api, 1).await;
    wait_in_sync(&reader, &api).await;
    let own = OWN_LISTS.load(std::sync::atomic::Ordering::SeqCst) as f64;
    assert_eq!(
        server.metric(LISTS) - own,
        0.0,
        "the watcher relisted although history covered the gap"
    );

    // History of one event: the resumed watch gets 410 Gone in-stream and the watcher relists.
    server.restart_with(&["--watch-cache-size", "1"]);
    OWN_LISTS.store(0, std::sync::atomic::Ordering::SeqCst);
    changes(&api, 2).await;
    wait_in_sync(&reader, &api).await;
    let own = OWN_LISTS.load(std::sync::atomic::Ordering::SeqCst) as f64;
    assert!(
        server.metric(LISTS) - own >= 1.0,
        "expected a relist after 410"
    );
    driver.abort();
}
