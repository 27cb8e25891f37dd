//! The store's rules with an in-memory backend; the SQLite backend is exercised by the
//! server tests (restart, kill -9).

use super::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Commits = Arc<Mutex<Vec<(Rev, Vec<Change>)>>>;

/// Keeps commits in memory; can be told to fail the next commit.
#[derive(Default, Clone)]
struct MemBackend {
    commits: Commits,
    fail_next: Arc<Mutex<bool>>,
    /// What `load` finds, and what was moved aside (key, reason).
    rows: Vec<Row>,
    quarantined: Arc<Mutex<Vec<(String, String)>>>,
}

impl Backend for MemBackend {
    fn load(&mut self, _: u64) -> Result<Loaded, StoreError> {
        Ok(Loaded {
            objects: self.rows.clone(),
            ..Default::default()
        })
    }
    fn quarantine(&mut self, rows: &[(Row, String)]) -> Result<(), StoreError> {
        let mut q = self.quarantined.lock().unwrap();
        q.extend(rows.iter().map(|(r, why)| (r.key.clone(), why.clone())));
        Ok(())
    }
    fn commit(&mut self, rev: Rev, changes: &[Change]) -> Result<(), StoreError> {
        if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
            return Err(StoreError::Backend("disk full".into()));
        }
        self.commits.lock().unwrap().push((rev, changes.to_vec()));
        Ok(())
    }
    fn prune_history(&mut self, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
}

fn put(key: &str, p: Precondition) -> Write {
    Write {
        key: key.into(),
        value: Some(json!({"metadata": {"name": key}})),
        precondition: p,
    }
}

fn open(b: &MemBackend, max_events: usize) -> Store {
    Store::open(b.clone(), Duration::from_secs(300), max_events, |_, _| {
        Ok(())
    })
    .unwrap()
}

#[tokio::test]
async fn writes_get_increasing_revisions_and_preconditions_hold() {
    let b = MemBackend::default();
    let s = open(&b, 100);
    let a = s
        .write(put("/a", Precondition::MustNotExist))
        .await
        .unwrap();
    assert_eq!(a.rev, 1);
    assert_eq!(a.obj["metadata"]["resourceVersion"], "1");
    assert_eq!(
        s.write(put("/a", Precondition::MustNotExist))
            .await
            .unwrap_err(),
        StoreError::AlreadyExists
    );
    assert_eq!(
        s.write(put("/b", Precondition::MustExist))
            .await
            .unwrap_err(),
        StoreError::NotFound
    );
    let a2 = s.write(put("/a", Precondition::Rev(1))).await.unwrap();
    assert_eq!(a2.rev, 2);
    assert_eq!(
        s.write(put("/a", Precondition::Rev(1))).await.unwrap_err(),
        StoreError::Conflict { current: 2 }
    );
    let del = s
        .write(Write {
            key: "/a".into(),
            value: None,
            precondition: Precondition::MustExist,
        })
        .await
        .unwrap();
    assert_eq!(del.rev, 3);
    assert!(s.get("/a").is_none());
    assert_eq!(s.current_rev(), 3);
}

#[tokio::test]
async fn a_failed_commit_changes_nothing() {
    let b = MemBackend::default();
    let s = open(&b, 100);
    *b.fail_next.lock().unwrap() = true;
    assert!(matches!(
        s.write(put("/a", Precondition::MustNotExist)).await,
        Err(StoreError::Backend(_))
    ));
    assert!(s.get("/a").is_none());
    assert_eq!(s.current_rev(), 0);
    assert_eq!(
        s.write(put("/a", Precondition::MustNotExist))
            .await
            .unwrap()
            .rev,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_are_batched() {
    let b = MemBackend::default();
    let s = open(&b, 10_000);
    let tasks: Vec<_> = (0..500)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.write(put(&format!("/k{i}"), Precondition::MustNotExist))
                    .await
                    .unwrap()
                    .rev
            })
        })
        .collect();
    let mut revs = Vec::new();
    for t in tasks {
        revs.push(t.await.unwrap());
    }
    revs.sort();
    assert_eq!(revs, (1..=500).collect::<Vec<_>>());
    let commits = b.commits.lock().unwrap().len();
    assert!(
        commits < 500,
        "500 concurrent writes took {commits} commits"
    );
}

#[tokio::test]
async fn watches_resume_after_a_revision_and_too_old_is_refused() {
    let b = MemBackend::default();
    let s = open(&b, 3);
    for i in 0..5 {
        s.write(put(&format!("/p/{i}"), Precondition::MustNotExist))
            .await
            .unwrap();
    }
    // History holds revisions 3..=5: resuming after 2 works, after 1 is too old.
    let (_, mut sub) = s.watch("/p/", Some(2)).unwrap();
    let next = sub.next().await.unwrap().unwrap();
    assert_eq!((next.entry.rev, next.kind), (3, EventType::Added));
    assert!(s.watch("/p/", Some(1)).is_err());
    match s.watch("/p/", None).unwrap() {
        (WatchStart::Snapshot(items, rev), _) => assert_eq!((items.len(), rev), (5, 5)),
        _ => panic!("expected a snapshot"),
    }
}

#[tokio::test]
async fn modified_events_carry_the_previous_object() {
    let b = MemBackend::default();
    let s = open(&b, 100);
    s.write(put("/a", Precondition::MustNotExist))
        .await
        .unwrap();
    let (_, mut sub) = s.watch("/", Some(1)).unwrap();
    let mut w = put("/a", Precondition::MustExist);
    w.value = Some(json!({"metadata": {"name": "a", "labels": {"x": "y"}}}));
    s.write(w).await.unwrap();
    let ev = sub.next().await.unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Modified);
    assert_eq!(ev.prev.as_ref().unwrap().obj["metadata"]["name"], "/a");
}

#[tokio::test]
async fn watches_see_only_their_prefix() {
    let b = MemBackend::default();
    let s = open(&b, 100);
    let (_, mut pods) = s.watch("/core/pods/", Some(0)).unwrap();
    s.write(put(
        "/apps/deployments/default/web",
        Precondition::MustNotExist,
    ))
    .await
    .unwrap();
    s.write(put("/core/pods/default/web-1", Precondition::MustNotExist))
        .await
        .unwrap();
    let ev = pods.next().await.unwrap().unwrap();
    assert_eq!(ev.key, "/core/pods/default/web-1");
    assert_eq!(pods.last_rev(), 2);
}

#[tokio::test]
async fn the_store_and_its_history_keep_bytes_only() {
    let b = MemBackend::default();
    let s = open(&b, 100);
    let (_, mut sub) = s.watch("/", Some(0)).unwrap();
    let written = s
        .write(put("/a", Precondition::MustNotExist))
        .await
        .unwrap();
    // The writer's copy keeps the object it wrote; the store's copies are parsed on use only.
    assert!(written.obj.cell.get().is_some());
    let stored = s.get("/a").unwrap();
    assert!(stored.obj.cell.get().is_none());
    assert_eq!(stored.value()["metadata"]["name"], "/a");
    assert!(stored.obj.cell.get().is_none(), "value() keeps nothing");
    assert_eq!(stored.obj["metadata"]["resourceVersion"], "1");
    assert!(s.get("/a").unwrap().obj.cell.get().is_none());
    let ev = sub.next().await.unwrap().unwrap();
    assert!(ev.entry.obj.cell.get().is_none());
    assert_eq!(ev.entry.json, stored.json);
}

#[test]
fn rows_that_do_not_decode_are_moved_aside_at_load() {
    let row = |key: &str, json: &str| Row {
        key: key.into(),
        rev: 1,
        json: bytes::Bytes::copy_from_slice(json.as_bytes()),
    };
    let deep = "[".repeat(129) + &"]".repeat(129);
    let b = MemBackend {
        rows: vec![
            row("/good", r#"{"metadata":{"name":"good"}}"#),
            row("/cut", r#"{"metadata":"#),
            row("/deep", &deep),
            row("/refused", r#"{"metadata":{}}"#),
        ],
        ..Default::default()
    };
    let check: Check = |_, obj| match obj["metadata"]["name"].as_str() {
        Some(_) => Ok(()),
        None => Err("no name".into()),
    };
    let s = Store::open(b.clone(), Duration::from_secs(300), 100, check).unwrap();
    assert!(s.get("/good").is_some());
    assert!(s.get("/cut").is_none() && s.get("/deep").is_none() && s.get("/refused").is_none());
    let q = b.quarantined.lock().unwrap().clone();
    let keys: Vec<&str> = q.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["/cut", "/deep", "/refused"]);
    assert!(
        q[0].1.starts_with("invalid JSON: EOF while parsing"),
        "{q:?}"
    );
    assert!(q[1].1.contains("recursion limit exceeded"), "{q:?}");
    assert_eq!(q[2].1, "no name");
}
