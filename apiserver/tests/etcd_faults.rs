//! Two API servers on a three-member etcd cluster under continuous writes: losing one member,
//! then one API server, loses no acknowledged write and a watch resumes (on the other server)
//! without a gap, or relists after a 410; losing a majority makes writes fail within seconds
//! with an error naming etcd, and they succeed again once the majority is back.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use keelson_testing::{eventually, Apiserver, Etcd};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the writers and the watcher record.
#[derive(Default)]
struct Record {
    /// Names whose create was acknowledged (201).
    acked: Mutex<Vec<String>>,
    /// Names the watcher saw (events, or a relist after 410).
    seen: Mutex<HashSet<String>>,
    failed: AtomicUsize,
    relists: AtomicUsize,
    /// Watches started again after their stream ended or broke.
    resumes: AtomicUsize,
    /// Times the watch moved on to the other server.
    failovers: AtomicUsize,
    stop: AtomicBool,
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": { "test": "faults" } },
        "data": { "k": "v" },
    }))
    .unwrap()
}

/// Creates ConfigMaps `<prefix>-N` one after another until stopped; records each acknowledged.
async fn writer(client: kube::Client, prefix: String, rec: Arc<Record>) {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut i = 0;
    while !rec.stop.load(Ordering::SeqCst) {
        let name = format!("{prefix}-{i}");
        i += 1;
        let created = tokio::time::timeout(
            Duration::from_secs(15),
            api.create(&PostParams::default(), &cm(&name)),
        )
        .await;
        match created {
            Ok(Ok(_)) => rec.acked.lock().unwrap().push(name),
            _ => {
                rec.failed.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Watches the ConfigMaps through the first client that answers, resuming from the last
/// resourceVersion seen (on the next server when one is gone), relisting after a 410.
async fn watcher(clients: Vec<kube::Client>, mut rv: String, rec: Arc<Record>) {
    let mut at = 0;
    while !rec.stop.load(Ordering::SeqCst) {
        let api: Api<ConfigMap> = Api::namespaced(clients[at].clone(), "default");
        let params = WatchParams::default().labels("test=faults").timeout(5);
        let stream = match api.watch(&params, &rv).await {
            Ok(s) => s,
            Err(_) => {
                at = (at + 1) % clients.len();
                rec.failovers.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut stream = stream.boxed();
        loop {
            match stream.try_next().await {
                Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    rv = o.metadata.resource_version.clone().unwrap_or(rv);
                    let name = o.metadata.name.unwrap_or_default();
                    rec.seen.lock().unwrap().insert(name);
                }
                Ok(Some(WatchEvent::Bookmark(b))) => rv = b.metadata.resource_version,
                Ok(Some(WatchEvent::Deleted(_))) => {}
                Ok(Some(WatchEvent::Error(e))) if e.code == 410 => {
                    rv = relist(&api, &rec).await.unwrap_or(rv);
                    break;
                }
                Ok(Some(WatchEvent::Error(_))) | Err(_) => {
                    at = (at + 1) % clients.len();
                    rec.failovers.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                Ok(None) => break,
            }
        }
        rec.resumes.fetch_add(1, Ordering::SeqCst);
    }
}

/// After a 410: every ConfigMap there counts as seen; returns the list's resourceVersion.
async fn relist(api: &Api<ConfigMap>, rec: &Record) -> Option<String> {
    let list = api
        .list(&ListParams::default().labels("test=faults"))
        .await
        .ok()?;
    rec.relists.fetch_add(1, Ordering::SeqCst);
    let mut seen = rec.seen.lock().unwrap();
    seen.extend(list.items.into_iter().filter_map(|c| c.metadata.name));
    list.metadata.resource_version
}

fn acked(rec: &Record) -> usize {
    rec.acked.lock().unwrap().len()
}

/// Lets the writers run for `d`, then until some writes were acknowledged since the start of
/// the phase (a lost etcd leader or connection may hold writes for a few seconds); panics if
/// none are within 15 s more.
async fn writes_go_on(rec: &Record, d: Duration, phase: &str) {
    let before = acked(rec);
    tokio::time::sleep(d).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while acked(rec) <= before + 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = acked(rec);
    assert!(
        after > before + 5,
        "{phase}: {} writes acknowledged in {:?}",
        after - before,
        d + Duration::from_secs(15)
    );
}

/// A blocking step of the test (killing, restarting) off the async workers.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_a_member_and_a_server_lost_and_watches_have_no_gap() {
    let mut etcd = Etcd::cluster(3);
    let endpoints = etcd.endpoints();
    let flags = ["--etcd-servers", endpoints.as_str()];
    let mut a = Apiserver::start_with(&flags);
    let b = Apiserver::start_sharing(&a, &flags);
    let (ca, cb) = (a.client().await, b.client().await);
    let rec = Arc::new(Record::default());
    let start: Api<ConfigMap> = Api::namespaced(ca.clone(), "default");
    let rv = start
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // The watch starts on the server that will be killed, and goes on on the other.
    let watch = tokio::spawn(watcher(vec![ca.clone(), cb.clone()], rv, rec.clone()));
    let writers: Vec<_> = [("a0", &ca), ("a1", &ca), ("b0", &cb), ("b1", &cb)]
        .into_iter()
        .map(|(p, c)| tokio::spawn(writer(c.clone(), p.to_string(), rec.clone())))
        .collect();
    writes_go_on(&rec, Duration::from_secs(2), "all up").await;
    blocking(|| etcd.kill(0));
    writes_go_on(&rec, Duration::from_secs(3), "one etcd member lost").await;
    blocking(|| a.kill9());
    writes_go_on(&rec, Duration::from_secs(3), "one API server lost").await;
    rec.stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    // Every acknowledged write is stored, and the watch saw each (or relisted it).
    let names: HashSet<String> = Api::<ConfigMap>::namespaced(cb.clone(), "default")
        .list(&ListParams::default().labels("test=faults"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let acked_names = rec.acked.lock().unwrap().clone();
    let lost: Vec<&String> = acked_names.iter().filter(|n| !names.contains(*n)).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    // The watcher stops at its next resume; give it until then to deliver the last events.
    let deadline = Instant::now() + Duration::from_secs(10);
    let missed = loop {
        let seen = rec.seen.lock().unwrap().clone();
        let missed: Vec<String> = acked_names
            .iter()
            .filter(|n| !seen.contains(*n))
            .cloned()
            .collect();
        if missed.is_empty() || Instant::now() > deadline {
            break missed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    watch.abort();
    assert!(
        missed.is_empty(),
        "the watch missed {} acknowledged creates: {missed:?}",
        missed.len()
    );
    let failovers = rec.failovers.load(Ordering::SeqCst);
    assert!(failovers >= 1, "the watch never moved to the other server");
    eprintln!(
        "{} acknowledged, {} failed, {} watch resumes, {failovers} failovers, {} relists",
        acked_names.len(),
        rec.failed.load(Ordering::SeqCst),
        rec.resumes.load(Ordering::SeqCst),
        rec.relists.load(Ordering::SeqCst)
    );
}

/// POSTs a ConfigMap through `s`: (status, body, how long it took).
fn post(s: &Apiserver, name: &str) -> (u16, String, Duration) {
    let body = serde_json::json!({ "metadata": { "name": name } }).to_string();
    let t = Instant::now();
    let (code, out) = s.curl_admin(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        None,
        Some(&body),
    );
    (code, out, t.elapsed())
}

#[test]
fn without_a_majority_writes_fail_within_seconds_naming_etcd_and_succeed_once_it_is_back() {
    let mut etcd = Etcd::cluster(3);
    let a = Apiserver::start_with(&["--etcd-servers", &etcd.endpoints()]);
    assert_eq!(post(&a, "before").0, 201);
    etcd.kill(1);
    etcd.kill(2);
    // The remaining member notices within its election timeout (1 s) that it has no leader.
    let (code, out, took) = eventually("writes to fail", Duration::from_secs(15), || {
        let (code, out, took) = post(&a, &format!("lost-{}", keelson_testing::random_suffix()));
        match code {
            201 => Err(format!("still accepted: {out}")),
            _ => Ok((code, out, took)),
        }
    });
    assert_eq!(code, 503, "{out}");
    assert!(out.contains("etcd"), "the error does not name etcd: {out}");
    assert!(
        took < Duration::from_secs(10),
        "the write took {took:?} to fail"
    );
    let (code, body) = a.curl_admin("GET", "/readyz?verbose", None, None);
    assert!(
        code != 200 && body.contains("etcd"),
        "/readyz: {code} {body}"
    );
    etcd.restart(1);
    etcd.restart(2);
    eventually(
        "writes to succeed again",
        Duration::from_secs(30),
        || match post(&a, &format!("back-{}", keelson_testing::random_suffix())) {
            (201, _, _) => Ok(()),
            (code, out, _) => Err(format!("{code}: {out}")),
        },
    );
    eventually("/readyz again", Duration::from_secs(15), || {
        match a.curl_admin("GET", "/readyz?verbose", None, None) {
            (200, _) => Ok(()),
            (code, body) => Err(format!("{code}: {body}")),
        }
    });
    a.kubectl_ok(&["get", "configmap", "before"]);
}
