//! `keelson-apiserver snapshot save|restore` on the embedded store: a snapshot taken while
//! clients write holds every object acknowledged before it; the restored server continues
//! resourceVersions above the old server's, sends 410 Gone to a watch resuming from one of
//! them, and keeps the cluster's CA (an old kubeconfig still works). Scheduled snapshots keep
//! the newest --snapshot-retention.

use keelson_testing::apiserver::admin;
use keelson_testing::{eventually, Apiserver, Etcd};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `keelson-apiserver snapshot ARGS --data-dir DIR`: (success, stdout + stderr).
fn snapshot(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut all: Vec<&OsStr> = vec!["snapshot".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    all.extend(["--data-dir".as_ref(), dir.as_os_str()]);
    admin(&all)
}

/// A ConfigMap acknowledged by the server: its name, resourceVersion and when the reply came.
struct Ack {
    name: String,
    rv: u64,
    at: Instant,
}

/// Creates ConfigMaps from `threads` clients until `stop`.
fn writers(s: &Apiserver, threads: usize, stop: Arc<AtomicBool>) -> Arc<Mutex<Vec<Ack>>> {
    let acks = Arc::new(Mutex::new(Vec::new()));
    for t in 0..threads {
        let (stop, acks) = (stop.clone(), acks.clone());
        let (url, token) = (s.url(""), s.token());
        std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let name = format!("w{t}-{i}");
                let body = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"i":"{i}"}}}}"#
                );
                let out = Command::new("curl")
                    .args(["-sSk", "-m", "10", "-X", "POST", "-w", "\n%{http_code}"])
                    .args(["-H", &format!("Authorization: Bearer {token}")])
                    .args([
                        "-H",
                        "Content-Type: application/json",
                        "--data-binary",
                        &body,
                    ])
                    .arg(format!("{url}/api/v1/namespaces/default/configmaps"))
                    .output()
                    .unwrap();
                let at = Instant::now();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                if !text.ends_with("\n201") {
                    continue;
                }
                let obj: serde_json::Value =
                    serde_json::from_str(text.trim_end_matches("\n201")).unwrap();
                let rv = obj["metadata"]["resourceVersion"].as_str().unwrap();
                acks.lock().unwrap().push(Ack {
                    name,
                    rv: rv.parse().unwrap(),
                    at,
                });
            }
        });
    }
    acks
}

fn acked(acks: &Mutex<Vec<Ack>>) -> usize {
    acks.lock().unwrap().len()
}

#[test]
fn a_snapshot_taken_under_write_load_restores_every_object_acknowledged_before_it() {
    under_write_load_then_restore(None, None);
}

#[test]
fn on_etcd_a_snapshot_restores_into_a_new_empty_etcd() {
    let (old, new) = (Etcd::start(), Etcd::start());
    under_write_load_then_restore(Some(&old), Some(&new));
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `--etcd-servers URL` for an etcd, nothing for SQLite.
fn on(etcd: Option<&Etcd>) -> Vec<String> {
    etcd.map(|e| vec!["--etcd-servers".to_string(), e.endpoints()])
        .unwrap_or_default()
}

/// A server on `old` (SQLite when None) written to by 3 clients; a snapshot taken meanwhile;
/// restored into a new data directory (and `new`, an empty etcd), which must serve every object
/// acknowledged before the snapshot began, above the old server's resourceVersions.
fn under_write_load_then_restore(old: Option<&Etcd>, new_etcd: Option<&Etcd>) {
    let (old_flags, new_flags) = (on(old), on(new_etcd));
    let mut s = Apiserver::start_with(&args(&old_flags));
    let stop = Arc::new(AtomicBool::new(false));
    let acks = writers(&s, 3, stop.clone());
    eventually("30 writes", Duration::from_secs(30), || {
        (acked(&acks) >= 30)
            .then_some(())
            .ok_or(format!("{} acknowledged", acked(&acks)))
    });
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("snapshot.db");
    let started = Instant::now();
    let save = [&["save", file.to_str().unwrap()][..], &args(&old_flags)].concat();
    let (ok, out) = snapshot(s.dir.path(), &save);
    assert!(ok, "{out}");
    assert!(out.contains("object(s) at revision"), "{out}");
    // The old server goes on issuing resourceVersions after the snapshot.
    let after = acked(&acks);
    eventually("30 more writes", Duration::from_secs(30), || {
        (acked(&acks) >= after + 30)
            .then_some(())
            .ok_or(format!("{} acknowledged", acked(&acks)))
    });
    stop.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    let (before, newest): (Vec<String>, u64) = {
        let acks = acks.lock().unwrap();
        let before = acks
            .iter()
            .filter(|a| a.at < started)
            .map(|a| a.name.clone())
            .collect();
        (before, acks.iter().map(|a| a.rv).max().unwrap())
    };
    let uid = s.jsonpath_ok(&["configmap", "w0-0"], "{.metadata.uid}");
    let old_kubeconfig = files.path().join("old.kubeconfig");
    std::fs::copy(s.kubeconfig(), &old_kubeconfig).unwrap();

    let restore = [&["restore", file.to_str().unwrap()][..], &args(&new_flags)].concat();
    // Not into the running server's directory.
    let (ok, out) = snapshot(s.dir.path(), &restore);
    assert!(
        !ok && out.contains("in use by another keelson-apiserver"),
        "{out}"
    );
    s.stop();
    let new = tempfile::Builder::new()
        .prefix("keelson-apiserver-test")
        .tempdir()
        .unwrap();
    if old.is_some() {
        // Not into an etcd that holds a cluster.
        let into_old = [&["restore", file.to_str().unwrap()][..], &args(&old_flags)].concat();
        let (ok, out) = snapshot(new.path(), &into_old);
        assert!(
            !ok && out.contains("restore into a new, empty etcd"),
            "{out}"
        );
    }
    let (ok, out) = snapshot(new.path(), &restore);
    assert!(ok, "{out}");
    if new_etcd.is_some() {
        // Run again (as after a failure): nothing changes.
        let (ok, again) = snapshot(new.path(), &restore);
        assert!(ok, "{again}");
    }
    let _old = std::mem::replace(&mut s.dir, new);
    s.restart_with(&args(&new_flags));

    let names = s.kubectl_ok(&[
        "get",
        "configmaps",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let names: Vec<&str> = names.split_whitespace().collect();
    let lost: Vec<&String> = before
        .iter()
        .filter(|n| !names.contains(&n.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged before the snapshot, not restored: {lost:?}"
    );
    assert_eq!(
        s.jsonpath_ok(&["configmap", "w0-0"], "{.metadata.uid}"),
        uid
    );
    // Updates compare the restored resourceVersions (on etcd: less the offset).
    s.kubectl_ok(&["label", "configmap", "w0-0", "restored=yes"]);
    s.kubectl_ok(&["delete", "configmap", "w0-1"]);
    let stale = s.kubectl_stdin(
        &["replace", "-f", "-"],
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: w0-0, resourceVersion: \"{newest}\"}}\n"),
    );
    let err = String::from_utf8_lossy(&stale.stderr);
    assert!(
        !stale.status.success() && err.contains("has been modified"),
        "{err}"
    );

    // resourceVersions go on above every one the old server issued.
    let (_, list) = s.curl_admin("GET", "/api/v1/namespaces/default/configmaps", None, None);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let list_rv: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        list_rv > newest,
        "list at {list_rv}, old server reached {newest}"
    );
    let made = s.kubectl_ok(&[
        "create",
        "configmap",
        "after-restore",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert!(made.parse::<u64>().unwrap() > list_rv, "{made}");

    // A watch resuming from the old server's resourceVersion is told to relist.
    let path = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={newest}");
    let (code, body) = s.curl_admin("GET", &path, None, None);
    assert!(code == 200 || code == 410, "{code} {body}");
    assert!(body.contains("\"code\":410"), "{body}");

    // The cluster's CA and keys came along: a kubeconfig of the old server still works.
    let out = Command::new("kubectl")
        .args([
            "--kubeconfig",
            old_kubeconfig.to_str().unwrap(),
            "get",
            "configmap",
            "after-restore",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scheduled_snapshots_keep_the_newest_and_restore() {
    scheduled(None);
}

#[test]
fn scheduled_snapshots_on_etcd_restore_into_sqlite() {
    let etcd = Etcd::start();
    scheduled(Some(&etcd));
}

/// A server taking a snapshot every second, keeping 2; the newest restores (on SQLite).
fn scheduled(etcd: Option<&Etcd>) {
    let store = on(etcd);
    let flags = [
        &["--snapshot-interval", "1s", "--snapshot-retention", "2"][..],
        &args(&store),
    ]
    .concat();
    let s = Apiserver::start_with(&flags);
    s.kubectl_ok(&["create", "configmap", "kept", "--from-literal=k=v"]);
    let dir = s.dir.path().join("snapshots");
    let list = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let first = eventually("a scheduled snapshot", Duration::from_secs(20), || {
        list().first().cloned().ok_or("none yet".to_string())
    });
    eventually(
        "the first snapshot removed, two kept",
        Duration::from_secs(20),
        || {
            let now = list();
            (!now.contains(&first) && now.len() == 2)
                .then_some(())
                .ok_or(format!("{now:?}"))
        },
    );
    assert!(s.metric("keelson_apiserver_snapshot_last_success_timestamp_seconds") > 0.0);
    assert_eq!(s.metric("keelson_apiserver_snapshot_failures_total"), 0.0);

    // The server goes on taking snapshots and removing the oldest: the newest is copied out
    // first, as an operator would before restoring it elsewhere.
    let target = tempfile::tempdir().unwrap();
    let newest = target.path().join("newest.db");
    std::fs::copy(dir.join(list().last().unwrap()), &newest).unwrap();
    let (ok, out) = snapshot(
        &target.path().join("data"),
        &["restore", newest.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    assert!(out.contains("object(s) at revision"), "{out}");
    let restored = keelson_apiserver::store::snapshot::read(&newest).unwrap();
    let kept = restored
        .objects
        .iter()
        .find(|(k, _)| k.ends_with("/configmaps/default/kept"));
    assert!(
        kept.is_some(),
        "{:?}",
        restored.objects.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
}
