//! The storage rules, run against both real backends: SQLite in a temporary directory and a real
//! etcd member on loopback (keelson-testing's `Etcd`). One set of tests, two backends.

use super::*;
use serde_json::json;
use std::time::Duration;

/// A backend the rules run against, and what keeps it alive.
pub(super) enum Backing {
    Sqlite(tempfile::TempDir),
    Etcd(keelson_testing::Etcd),
}

fn any(_: &str, _: &Value) -> Result<(), String> {
    Ok(())
}

impl Backing {
    pub(super) fn sqlite() -> Backing {
        Backing::Sqlite(tempfile::tempdir().unwrap())
    }

    pub(super) fn etcd() -> Backing {
        Backing::Etcd(keelson_testing::Etcd::start())
    }

    /// A store on this backend keeping at most `max_events` of watch history. Each call on
    /// etcd is one more server on the same etcd.
    pub(super) async fn open(&self, max_events: usize) -> Store {
        match self {
            Backing::Sqlite(dir) => {
                let b = SqliteBackend::open(&dir.path().join(DB_FILE)).unwrap();
                Store::open(b, HISTORY, max_events, any).unwrap()
            }
            Backing::Etcd(e) => open_etcd(&config(e), max_events).await,
        }
    }
}

const HISTORY: Duration = Duration::from_secs(300);

/// A server's store on etcd with these flags, keeping at most `max_events` of watch history.
pub(super) async fn open_etcd(cfg: &EtcdConfig, max_events: usize) -> Store {
    crate::Store::open_etcd(cfg, HISTORY, max_events, any)
        .await
        .unwrap()
}

/// The flags a server on `e` would have, without compaction.
pub(super) fn config(e: &keelson_testing::Etcd) -> EtcdConfig {
    EtcdConfig {
        servers: e.endpoints().split(',').map(String::from).collect(),
        ca_file: None,
        cert_file: None,
        key_file: None,
        prefix: "/registry".into(),
        compaction_interval: Duration::ZERO,
    }
}

pub(super) fn put(key: &str, p: Precondition) -> Write {
    Write {
        key: key.into(),
        value: Some(json!({"metadata": {"name": key}})),
        precondition: p,
    }
}

/// Creates `key` (it must not exist) with `put`'s object.
pub(super) async fn create(s: &Store, key: &str) -> Entry {
    s.write(put(key, Precondition::MustNotExist)).await.unwrap()
}

pub(super) fn delete(key: &str, p: Precondition) -> Write {
    Write {
        key: key.into(),
        value: None,
        precondition: p,
    }
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backing::sqlite()).await
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backing::etcd()).await
                }
            )*
        }
    };
}

on_both_backends!(
    writes_get_increasing_revisions_and_preconditions_hold,
    a_deletion_returns_the_object_at_the_deletion_revision,
    concurrent_creates_all_commit_with_distinct_revisions,
    compare_and_swap_loses_no_update,
    watches_resume_after_a_revision_and_too_old_is_refused,
    modified_events_carry_the_previous_object,
    watches_see_only_their_prefix,
    the_store_and_its_history_keep_bytes_only,
    objects_survive_reopening,
    large_objects_survive_reopening,
);

async fn writes_get_increasing_revisions_and_preconditions_hold(b: Backing) {
    let s = b.open(100).await;
    let r0 = s.current_rev();
    let a = create(&s, "/a").await;
    assert!(a.rev > r0);
    assert_eq!(a.obj["metadata"]["resourceVersion"], a.rev.to_string());
    assert_eq!(s.get("/a").unwrap().rev, a.rev);
    let again = s.write(put("/a", Precondition::MustNotExist)).await;
    assert_eq!(again.unwrap_err(), StoreError::AlreadyExists);
    let missing = s.write(put("/b", Precondition::MustExist)).await;
    assert_eq!(missing.unwrap_err(), StoreError::NotFound);
    let missing = s.write(put("/b", Precondition::Rev(a.rev))).await;
    assert_eq!(missing.unwrap_err(), StoreError::NotFound);
    let a2 = s.write(put("/a", Precondition::Rev(a.rev))).await.unwrap();
    assert!(a2.rev > a.rev);
    assert_eq!(
        s.write(put("/a", Precondition::Rev(a.rev)))
            .await
            .unwrap_err(),
        StoreError::Conflict { current: a2.rev }
    );
    let a3 = s.write(put("/a", Precondition::MustExist)).await.unwrap();
    assert!(a3.rev > a2.rev);
    let del = s
        .write(delete("/a", Precondition::MustExist))
        .await
        .unwrap();
    assert!(del.rev > a3.rev);
    assert!(s.get("/a").is_none());
    assert_eq!(s.current_rev(), del.rev);
    let gone = s.write(delete("/a", Precondition::MustExist)).await;
    assert_eq!(gone.unwrap_err(), StoreError::NotFound);
}

async fn a_deletion_returns_the_object_at_the_deletion_revision(b: Backing) {
    let s = b.open(100).await;
    let mut w = put("/a", Precondition::MustNotExist);
    w.value = Some(json!({"metadata": {"name": "a", "labels": {"x": "y"}}}));
    let a = s.write(w).await.unwrap();
    let stale = s.write(delete("/a", Precondition::Rev(a.rev + 100))).await;
    assert_eq!(stale.unwrap_err(), StoreError::Conflict { current: a.rev });
    let del = s
        .write(delete("/a", Precondition::Rev(a.rev)))
        .await
        .unwrap();
    assert!(del.rev > a.rev);
    assert_eq!(del.obj["metadata"]["labels"]["x"], "y");
    assert_eq!(del.obj["metadata"]["resourceVersion"], del.rev.to_string());
}

async fn concurrent_creates_all_commit_with_distinct_revisions(b: Backing) {
    let s = b.open(10_000).await;
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let s = s.clone();
            let w = put(&format!("/k/{i}"), Precondition::MustNotExist);
            tokio::spawn(async move { s.write(w).await.unwrap().rev })
        })
        .collect();
    let mut revs = Vec::new();
    for t in tasks {
        revs.push(t.await.unwrap());
    }
    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), 200);
    let (items, rev) = s.list("/k/");
    assert_eq!(items.len(), 200);
    assert_eq!(rev, *revs.last().unwrap());
}

/// Twenty writers each add one to a counter with read, modify, compare-and-swap, retrying on
/// conflict: the counter ends at twenty.
async fn compare_and_swap_loses_no_update(b: Backing) {
    let s = b.open(1000).await;
    let mut w = put("/counter", Precondition::MustNotExist);
    w.value = Some(json!({"metadata": {"name": "counter"}, "n": 0}));
    s.write(w).await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move { increment(&s).await })
        })
        .collect();
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    assert_eq!(
        s.get("/counter").unwrap().obj["n"],
        20,
        "{conflicts} conflicts"
    );
}

async fn increment(s: &Store) -> usize {
    let mut conflicts = 0;
    loop {
        let cur = s.get("/counter").unwrap();
        let mut obj = (*cur.obj).clone();
        obj["n"] = json!(obj["n"].as_i64().unwrap() + 1);
        let w = Write {
            key: "/counter".into(),
            value: Some(obj),
            precondition: Precondition::Rev(cur.rev),
        };
        match s.write(w).await {
            Ok(_) => return conflicts,
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(e) => panic!("{e}"),
        }
    }
}

async fn watches_resume_after_a_revision_and_too_old_is_refused(b: Backing) {
    let s = b.open(3).await;
    let mut revs = Vec::new();
    for i in 0..5 {
        let w = put(&format!("/p/{i}"), Precondition::MustNotExist);
        revs.push(s.write(w).await.unwrap().rev);
    }
    // History holds the last three writes: resuming after the second works, after the first
    // is too old.
    let (_, mut sub) = s.watch("/p/", Some(revs[1])).unwrap();
    let next = sub.next().await.unwrap().unwrap();
    assert_eq!((next.entry.rev, next.kind), (revs[2], EventType::Added));
    assert_eq!(next.key, "/p/2");
    assert!(s.watch("/p/", Some(revs[0])).is_err());
    match s.watch("/p/", None).unwrap() {
        (WatchStart::Snapshot(items, rev), _) => assert_eq!((items.len(), rev), (5, revs[4])),
        _ => panic!("expected a snapshot"),
    }
}

async fn modified_events_carry_the_previous_object(b: Backing) {
    let s = b.open(100).await;
    let a = create(&s, "/a").await;
    let (_, mut sub) = s.watch("/", Some(a.rev)).unwrap();
    let mut w = put("/a", Precondition::MustExist);
    w.value = Some(json!({"metadata": {"name": "a", "labels": {"x": "y"}}}));
    s.write(w).await.unwrap();
    s.write(delete("/a", Precondition::MustExist))
        .await
        .unwrap();
    let ev = sub.next().await.unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Modified);
    assert_eq!(ev.prev.as_ref().unwrap().obj["metadata"]["name"], "/a");
    assert_eq!(ev.entry.obj["metadata"]["labels"]["x"], "y");
    let ev = sub.next().await.unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Deleted);
    assert_eq!(ev.entry.obj["metadata"]["labels"]["x"], "y");
    assert_eq!(
        ev.entry.obj["metadata"]["resourceVersion"],
        ev.entry.rev.to_string()
    );
}

async fn watches_see_only_their_prefix(b: Backing) {
    let s = b.open(100).await;
    let (_, mut pods) = s.watch("/core/pods/", Some(s.current_rev())).unwrap();
    let deploy = put("/apps/deployments/default/web", Precondition::MustNotExist);
    s.write(deploy).await.unwrap();
    let pod = put("/core/pods/default/web-1", Precondition::MustNotExist);
    let pod = s.write(pod).await.unwrap();
    let ev = pods.next().await.unwrap().unwrap();
    assert_eq!(ev.key, "/core/pods/default/web-1");
    assert_eq!(pods.last_rev(), pod.rev);
}

async fn the_store_and_its_history_keep_bytes_only(b: Backing) {
    let s = b.open(100).await;
    let (_, mut sub) = s.watch("/", Some(s.current_rev())).unwrap();
    let written = create(&s, "/a").await;
    // The writer's copy keeps the object it wrote; the store's copies are parsed on use only.
    assert!(written.obj.cell.get().is_some());
    let stored = s.get("/a").unwrap();
    assert!(stored.obj.cell.get().is_none());
    assert_eq!(stored.value()["metadata"]["name"], "/a");
    assert!(stored.obj.cell.get().is_none(), "value() keeps nothing");
    let rv = written.rev.to_string();
    assert_eq!(stored.obj["metadata"]["resourceVersion"], rv);
    assert!(s.get("/a").unwrap().obj.cell.get().is_none());
    let ev = sub.next().await.unwrap().unwrap();
    assert!(ev.entry.obj.cell.get().is_none());
    assert_eq!(ev.entry.json, stored.json);
}

async fn objects_survive_reopening(b: Backing) {
    let (kept, last) = {
        let s = b.open(100).await;
        let kept = create(&s, "/a").await;
        create(&s, "/b").await;
        let del = s
            .write(delete("/b", Precondition::MustExist))
            .await
            .unwrap();
        (kept, del.rev)
    };
    let s = b.open(100).await;
    let a = s.get("/a").expect("/a after reopening");
    assert_eq!(a.rev, kept.rev);
    assert_eq!(*a.obj, *kept.obj);
    assert!(s.get("/b").is_none());
    assert!(s.current_rev() >= last);
    let next = create(&s, "/c").await;
    assert!(next.rev > last);
}

/// Sixteen objects of half a megabyte: more than one reply of etcd's client default (4 MiB).
async fn large_objects_survive_reopening(b: Backing) {
    let big = "x".repeat(512 * 1024);
    {
        let s = b.open(100).await;
        for i in 0..16 {
            let mut w = put(&format!("/big/{i}"), Precondition::MustNotExist);
            w.value = Some(json!({"metadata": {"name": format!("big-{i}")}, "data": big}));
            s.write(w).await.unwrap();
        }
    }
    let s = b.open(100).await;
    let (items, _) = s.list("/big/");
    assert_eq!(items.len(), 16);
    assert!(items
        .iter()
        .all(|e| e.obj["data"].as_str() == Some(big.as_str())));
}
