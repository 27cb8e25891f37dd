//! What only the writer thread does, with an in-memory backend: batching, a failed commit,
//! quarantine at load. The storage rules run on both real backends in `suite.rs`.

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

#[test]
fn encode_is_compact_json_whatever_came_before() {
    // A large object first: its buffer is let go, and smaller objects after it are unaffected.
    let large = json!({ "data": { "k": "x".repeat(100_000) } });
    let small = json!({ "metadata": { "name": "a", "labels": { "app": "b" } } });
    for v in [&large, &small, &large, &small] {
        assert_eq!(&encode(v)[..], &serde_json::to_vec(v).unwrap()[..]);
    }
}
