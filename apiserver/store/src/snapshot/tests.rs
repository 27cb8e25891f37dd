//! Snapshots of a real SQLite store: taken while a writer commits, restored with the revision
//! bumped and no history, refused when they are not snapshots or would overwrite a store.

use super::*;
use crate::{Backend, Change, EventType, SqliteBackend, Store, DB_FILE};
use bytes::Bytes;
use rusqlite::Connection;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn put(rev: Rev, key: &str) -> Change {
    Change {
        rev,
        key: key.into(),
        kind: EventType::Added,
        json: Bytes::from(format!(
            r#"{{"metadata":{{"name":"{key}","resourceVersion":"{rev}"}}}}"#
        )),
    }
}

/// A data directory with a store of `n` objects and a CA.
fn data_dir(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut b = SqliteBackend::open(&dir.path().join(DB_FILE)).unwrap();
    for rev in 1..=n {
        b.commit(rev, &[put(rev, &format!("/k/{rev}"))]).unwrap();
    }
    std::fs::write(dir.path().join("ca.crt"), "CERT").unwrap();
    std::fs::write(dir.path().join("ca.key"), "KEY").unwrap();
    std::fs::write(dir.path().join("audit.log"), "not carried").unwrap();
    dir
}

#[test]
fn a_snapshot_taken_while_writes_commit_holds_every_commit_before_it() {
    let dir = data_dir(100);
    let committed = Arc::new(AtomicU64::new(100));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, committed, stop) = (dir.path().join(DB_FILE), committed.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut b = SqliteBackend::open(&path).unwrap();
            while !stop.load(Ordering::SeqCst) {
                let rev = committed.load(Ordering::SeqCst) + 1;
                b.commit(rev, &[put(rev, &format!("/k/{rev}"))]).unwrap();
                committed.store(rev, Ordering::SeqCst);
            }
        })
    };
    while committed.load(Ordering::SeqCst) < 300 {
        std::thread::yield_now();
    }
    let before = committed.load(Ordering::SeqCst);
    let out = dir.path().join("snap.db");
    let saved = save(dir.path(), &out).unwrap();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(saved.rev >= before, "{saved:?} before {before}");
    // One committed state: as many objects as revisions, the last one the snapshot's.
    assert_eq!(saved.objects as u64, saved.rev, "{saved:?}");
    assert_eq!(saved.files, 2, "ca.crt and ca.key, not audit.log");
    let mode = std::fs::metadata(&out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let new = tempfile::tempdir().unwrap();
    let target = new.path().join("restored");
    let restored = restore(&out, &target, 1000).unwrap();
    assert_eq!(restored.rev, saved.rev + 1000);
    assert_eq!(restored.objects, saved.objects);
    assert_eq!(std::fs::read(target.join("ca.key")).unwrap(), b"KEY");
    assert!(!target.join("audit.log").exists());

    // Served at the bumped revision, with no history to resume a watch from.
    let mut b = SqliteBackend::open(&target.join(DB_FILE)).unwrap();
    let loaded = b.load(3600).unwrap();
    assert_eq!(loaded.rev, saved.rev + 1000);
    assert!(loaded.events.is_empty());
    let store = Store::open(b, Duration::from_secs(300), 1000, |_, _| Ok(())).unwrap();
    assert!(store.watch("/k/", Some(saved.rev + 5)).is_err(), "too old");
    assert!(store.watch("/k/", Some(saved.rev + 1000)).is_ok());
    assert!(store.get(&format!("/k/{before}")).is_some());
}

#[test]
fn restore_refuses_what_is_not_a_snapshot_and_a_directory_with_a_store() {
    let dir = data_dir(3);
    let target = tempfile::tempdir().unwrap();
    // The store file itself is not a snapshot, and nothing is written.
    let err = restore(&dir.path().join(DB_FILE), &target.path().join("a"), 1).unwrap_err();
    assert!(
        err.to_string().contains("not a keelson-apiserver snapshot"),
        "{err}"
    );
    assert!(!target.path().join("a").exists());
    let junk = target.path().join("junk");
    std::fs::write(&junk, "hello").unwrap();
    let err = restore(&junk, &target.path().join("a"), 1).unwrap_err();
    assert!(
        err.to_string().contains("not a keelson-apiserver snapshot"),
        "{err}"
    );

    let snap = target.path().join("s.db");
    save(dir.path(), &snap).unwrap();
    let err = restore(&snap, dir.path(), 1).unwrap_err();
    assert!(err.to_string().contains("already holds a store"), "{err}");

    // A crafted file name cannot write outside the data directory.
    let conn = Connection::open(&snap).unwrap();
    conn.execute(
        "INSERT INTO files (name, content) VALUES ('../evil.key', 'x')",
        [],
    )
    .unwrap();
    drop(conn);
    let err = restore(&snap, &target.path().join("b"), 1).unwrap_err();
    assert!(err.to_string().contains("../evil.key"), "{err}");
    assert!(!target.path().join("evil.key").exists());
    assert!(!target.path().join("b").join(DB_FILE).exists());
}

#[test]
fn save_without_a_store_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = save(dir.path(), &dir.path().join("s.db")).unwrap_err();
    assert!(err.to_string().contains("store.db"), "{err}");
    assert!(!dir.path().join("s.db").exists());
    assert!(!dir.path().join("s.db.part").exists());
}

#[test]
fn scheduled_snapshots_keep_the_newest() {
    let dir = data_dir(2);
    let snaps = dir.path().join("snapshots");
    std::fs::create_dir_all(&snaps).unwrap();
    std::fs::write(snaps.join("before-upgrade.db"), "mine").unwrap();
    let mut made = Vec::new();
    for _ in 0..4 {
        let out = scheduled_name(&snaps).unwrap();
        save(dir.path(), &out).unwrap();
        prune(&snaps, 2).unwrap();
        made.push(out);
        std::thread::sleep(Duration::from_millis(5));
    }
    // Someone's own file in the directory is left alone.
    assert_eq!(scheduled_files(&snaps).unwrap(), made[2..].to_vec());
    assert!(snaps.join("before-upgrade.db").exists());
}
