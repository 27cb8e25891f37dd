//! What only the etcd backend does: several servers on one etcd, consistent reads, compaction,
//! an etcd outage, and the watch feed resuming past a compaction. Real etcd members on loopback.

use super::suite::{config, create, open_etcd, put, Backing};
use super::*;
use keelson_testing::Etcd;
use std::time::{Duration, Instant};

/// The config of a server that talks to one member only.
fn member(e: &Etcd, i: usize) -> EtcdConfig {
    EtcdConfig {
        servers: vec![e.members[i].client_url.clone()],
        ..config(e)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_see_each_others_writes() {
    let etcd = Backing::etcd();
    let (a, b) = (etcd.open(1000).await, etcd.open(1000).await);
    let (_, mut watch_a) = a.watch("/core/pods/", Some(a.current_rev())).unwrap();
    let pod = put("/core/pods/default/web", Precondition::MustNotExist);
    let written = b.write(pod).await.unwrap();
    // A consistent read on A right after B's write sees it, without sleeping.
    a.sync().await.unwrap();
    assert_eq!(a.get("/core/pods/default/web").unwrap().rev, written.rev);
    let ev = watch_a.next().await.unwrap().unwrap();
    assert_eq!((ev.kind, ev.entry.rev), (EventType::Added, written.rev));
    // A's compare-and-swap on the version B replaced is a conflict, wherever it is made.
    let update = put("/core/pods/default/web", Precondition::Rev(written.rev));
    let updated = a.write(update).await.unwrap();
    let stale = put("/core/pods/default/web", Precondition::Rev(written.rev));
    assert_eq!(
        b.write(stale).await.unwrap_err(),
        StoreError::Conflict {
            current: updated.rev
        }
    );
    let again = put("/core/pods/default/web", Precondition::MustNotExist);
    assert_eq!(b.write(again).await.unwrap_err(), StoreError::AlreadyExists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_turns_old_revisions_into_too_old() {
    let e = Etcd::start();
    let cfg = EtcdConfig {
        compaction_interval: Duration::from_millis(500),
        ..config(&e)
    };
    let s = open_etcd(&cfg, 1000).await;
    let first = create(&s, "/a").await;
    create(&s, "/b").await;
    assert!(s.watch("/", Some(first.rev)).is_ok());
    // The second round compacts to what the first saw, which includes both writes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.watch("/", Some(first.rev)).is_ok() {
        assert!(Instant::now() < deadline, "history never compacted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = e
        .etcdctl()
        .args(["get", "/registry/a", "--rev", &first.rev.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("compacted"),
        "etcd kept revision {}: {stderr}",
        first.rev
    );
    // Reads and writes go on.
    let c = create(&s, "/c").await;
    s.sync().await.unwrap();
    assert_eq!(s.get("/c").unwrap().rev, c.rev);
    assert_eq!(s.list("/").0.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_fails_requests_quickly_and_they_work_again() {
    let mut e = Etcd::start();
    let s = open_etcd(&config(&e), 1000).await;
    let (_, mut watch) = s.watch("/", Some(s.current_rev())).unwrap();
    e.kill(0);
    let started = Instant::now();
    fails_unavailable(&s).await;
    assert!(matches!(s.check().await, Some(Err(_))));
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "three failed requests took {:?}",
        started.elapsed()
    );
    e.restart(0);
    works_again(&s, &mut watch).await;
    assert!(matches!(s.check().await, Some(Ok(()))));
}

/// A server cut off from etcd while the others write and compact: when it reaches etcd again
/// its feed finds its revision compacted, lists again, and its watchers get "too old".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_resuming_past_a_compaction_lists_again() {
    let mut e = Etcd::cluster(3);
    let cut_off = open_etcd(&member(&e, 0), 1000).await;
    let other = open_etcd(&member(&e, 1), 1000).await;
    let old = create(&other, "/old").await;
    cut_off.wait_for(old.rev).await.unwrap();
    let (_, mut watch) = cut_off.watch("/", Some(cut_off.current_rev())).unwrap();
    e.kill(0);
    // If member 0 led, the others elect a leader first (writes meanwhile may time out).
    e.wait_healthy();
    let mut last = 0;
    for i in 0..5 {
        let w = put(&format!("/new/{i}"), Precondition::MustNotExist);
        last = other.write(w).await.unwrap().rev;
    }
    other
        .write(Write {
            key: "/old".into(),
            value: None,
            precondition: Precondition::MustExist,
        })
        .await
        .unwrap();
    let mut client = etcd_client::Client::connect([e.members[1].client_url.clone()], None)
        .await
        .unwrap();
    client.compact(last as i64, None).await.unwrap();
    e.restart(0);
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match watch.next().await {
                Some(Err(too_old)) => return too_old,
                Some(Ok(_)) => continue,
                None => panic!("the watch closed"),
            }
        }
    })
    .await
    .expect("the watch ends with too old");
    assert_eq!(ended, watch::TooOld);
    cut_off.sync().await.unwrap();
    let (items, _) = cut_off.list("/");
    let keys: Vec<&str> = items
        .iter()
        .map(|e| e.obj["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(keys, ["/new/0", "/new/1", "/new/2", "/new/3", "/new/4"]);
    assert!(cut_off.get("/old").is_none());
}

/// Without quorum, writes and consistent reads fail within seconds (not hang), naming etcd;
/// when the majority returns they work again and the watch goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_quorum_fails_requests_within_seconds() {
    let mut e = Etcd::cluster(3);
    let s = open_etcd(&config(&e), 1000).await;
    let (_, mut watch) = s.watch("/", Some(s.current_rev())).unwrap();
    e.kill(1);
    e.kill(2);
    let took = fails_unavailable(&s).await;
    assert!(
        took < Duration::from_secs(8),
        "the write failed after {took:?}"
    );
    e.restart(1);
    works_again(&s, &mut watch).await;
}

/// With etcd out of reach, a write of /a and a consistent read fail as unavailable, the write
/// naming etcd; how long the write took to fail.
async fn fails_unavailable(s: &Store) -> Duration {
    let started = Instant::now();
    let err = s
        .write(put("/a", Precondition::MustNotExist))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&err, StoreError::Unavailable(why) if why.starts_with("etcd")),
        "{err:?}"
    );
    assert!(matches!(s.sync().await, Err(StoreError::Unavailable(_))));
    took
}

/// Once etcd is back, a write of /a works within 20 s, and `watch`, made before the outage,
/// delivers it: the feed resumed.
async fn works_again(s: &Store, watch: &mut Subscription) {
    let written = write_when_back(s).await;
    let ev = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the watch delivers the write made after the outage")
        .unwrap()
        .unwrap();
    assert_eq!((ev.key.as_str(), ev.entry.rev), ("/a", written.rev));
}

/// Writes /a again and again until etcd takes it.
async fn write_when_back(s: &Store) -> Entry {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match s.write(put("/a", Precondition::MustNotExist)).await {
            Ok(w) => return w,
            // A write that timed out may have committed after all (etcd had it): as with
            // upstream, the client learns so from AlreadyExists.
            Err(StoreError::AlreadyExists) => match s.sync().await {
                Ok(()) => return s.get("/a").unwrap(),
                Err(err) if Instant::now() > deadline => panic!("no consistent read: {err}"),
                Err(_) => continue,
            },
            Err(err) if Instant::now() < deadline => {
                tracing::info!(%err, "not yet");
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(err) => panic!("etcd is back but writes fail: {err}"),
        }
    }
}
