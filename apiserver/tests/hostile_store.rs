//! The store and the server's lifecycle under careless or hostile use: a second server on the
//! same data directory, permissions, rows the server cannot decode, watches from the future,
//! dry-run and propagation on DELETE, Events' expiry.

use keelson_testing::Apiserver;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_keelson-apiserver")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// `keelson-apiserver quarantine ARGS --data-dir DIR`: (success, stdout + stderr).
fn quarantine(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut all: Vec<&OsStr> = vec!["quarantine".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    all.extend(["--data-dir".as_ref(), dir.as_os_str()]);
    keelson_testing::apiserver::admin(&all)
}

#[test]
fn a_second_server_on_the_same_data_directory_exits_at_once() {
    let server = Apiserver::start();
    // `timeout` only guards the test: the second server must exit by itself.
    let out = Command::new("timeout")
        .arg("30")
        .arg(bin())
        .args([
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            "--data-dir",
        ])
        .arg(server.dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "second server: {err}");
    let pid = server.pid().unwrap();
    assert!(
        err.contains(&format!(
            "{} is in use by another keelson-apiserver (pid {pid})",
            server.dir.path().display()
        )),
        "{err}"
    );
    // The first one still serves.
    server.kubectl_ok(&["get", "namespaces", "default"]);
}

#[test]
fn the_data_directory_and_its_files_are_private_and_fixed_at_start() {
    let mut server = Apiserver::start();
    server.kubectl_ok(&["create", "secret", "generic", "s", "--from-literal=k=v"]);
    server.stop();
    let dir = server.dir.path().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for f in ["store.db", "admin.token"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    server.start_again();
    assert_eq!(mode(&dir), 0o700);
    let mut files = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            files += 1;
            assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
        }
    }
    assert!(files >= 4, "{files} files in the data directory");
}

/// Objects stored with a server's own key layout, written behind its back while it is stopped.
fn corrupt_rows(db: &Path, rows: &[(&str, &[u8])]) {
    let conn = rusqlite::Connection::open(db).unwrap();
    for (key, value) in rows {
        conn.execute(
            "INSERT OR REPLACE INTO objects (key, rev, value) VALUES (?1, 1, ?2)",
            rusqlite::params![key, value],
        )
        .unwrap();
    }
}

#[test]
fn undecodable_rows_are_quarantined_and_the_server_starts() {
    let mut server = Apiserver::start();
    server.kubectl_ok(&["create", "configmap", "good", "--from-literal=k=v"]);
    server.stop();
    let deep = "[".repeat(200) + &"]".repeat(200);
    let deep = format!(r#"{{"metadata":{{"name":"deep","namespace":"default"}},"data":{deep}}}"#);
    corrupt_rows(
        &server.dir.path().join("store.db"),
        &[
            (
                "/core/configmaps/default/broken",
                b"{\"metadata\": {\"name\": \"bro",
            ),
            ("/core/configmaps/default/deep", deep.as_bytes()),
            ("/core/configmaps/default/list", b"[1, 2]"),
            (
                "/core/configmaps/default/typed",
                br#"{"metadata":{"name":"typed","namespace":"default"},"data":{"k":1}}"#,
            ),
        ],
    );
    // Written as the sqlite3 shell writes it (text, not a blob): good JSON, so it is served; a
    // number is no object at all.
    let conn = rusqlite::Connection::open(server.dir.path().join("store.db")).unwrap();
    conn.execute(
        "INSERT INTO objects (key, rev, value) VALUES ('/core/configmaps/default/textual', 1, ?1)",
        [r#"{"metadata":{"name":"textual","namespace":"default"}}"#],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO objects (key, rev, value) VALUES ('/core/configmaps/default/number', 1, 42)",
        [],
    )
    .unwrap();
    drop(conn);
    server.start_again();
    let log = server.log();
    for key in ["broken", "deep", "list", "typed", "number"] {
        assert!(
            log.contains(&format!("/core/configmaps/default/{key}")) && log.contains("quarantine"),
            "no quarantine line for {key}:\n{log}"
        );
    }
    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        names.contains("configmap/good") && names.contains("configmap/textual"),
        "{names}"
    );
    assert!(
        !names.contains("broken") && !names.contains("deep"),
        "{names}"
    );

    let dir = server.dir.path();
    let (ok, list) = quarantine(dir, &["list"]);
    assert!(ok, "{list}");
    assert!(
        list.contains("/core/configmaps/default/broken\t1\t"),
        "{list}"
    );
    assert!(list.contains("invalid JSON: EOF while parsing"), "{list}");
    assert!(list.contains("recursion limit exceeded"), "{list}");
    assert!(
        list.contains("/core/configmaps/default/list\t1\t"),
        "{list}"
    );
    assert!(
        list.contains("not a valid ConfigMap: data.k: Invalid value: 1"),
        "{list}"
    );
    let (ok, shown) = quarantine(dir, &["show", "/core/configmaps/default/list"]);
    assert!(ok && shown.trim() == "[1, 2]", "{shown}");
    let (ok, out) = quarantine(dir, &["delete", "/core/configmaps/default/broken"]);
    assert!(ok, "{out}");
    let (ok, out) = quarantine(dir, &["delete", "/core/configmaps/default/broken"]);
    assert!(!ok && out.contains("no quarantined object"), "{out}");
    let (_, list) = quarantine(dir, &["list"]);
    assert!(
        !list.contains("broken") && list.contains("/default/deep"),
        "{list}"
    );

    // Restarts stay clean: nothing is quarantined twice (the log is appended to).
    server.restart();
    let lines = server.log().matches("moved to quarantine").count();
    assert_eq!(lines, 5, "{}", server.log());
    server.kubectl_ok(&["get", "configmap", "good"]);
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_watch_or_list_from_a_future_resource_version_gets_too_large() {
    let server = Apiserver::start();
    server.kubectl_ok(&["create", "configmap", "a"]);
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, body) = server.curl_admin(
        "GET",
        &format!("{path}?watch=1&resourceVersion=999999"),
        None,
        None,
    );
    assert_eq!(code, 200, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 1, "one ERROR event, then the end: {body}");
    let ev = json(lines[0]);
    assert_eq!(ev["type"], "ERROR");
    let status = &ev["object"];
    assert_eq!(status["code"], 504);
    assert_eq!(status["reason"], "Timeout");
    let msg = status["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Timeout: Too large resource version: 999999, current: "),
        "{msg}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );

    let (code, body) =
        server.curl_admin("GET", &format!("{path}?resourceVersion=999999"), None, None);
    assert_eq!(code, 504, "{body}");
    assert_eq!(
        json(&body)["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    // The current version itself is fine.
    let (_, list) = server.curl_admin("GET", path, None, None);
    let rv = json(&list)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _) = server.curl_admin("GET", &format!("{path}?resourceVersion={rv}"), None, None);
    assert_eq!(code, 200);
}

#[test]
fn dry_run_deletes_change_nothing() {
    let server = Apiserver::start();
    server.kubectl_ok(&["create", "configmap", "a"]);
    server.kubectl_ok(&["create", "configmap", "b"]);
    let out = server.kubectl_ok(&["delete", "configmap", "a", "--dry-run=server"]);
    assert!(
        out.contains("configmap \"a\" deleted (server dry run)"),
        "{out}"
    );
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, body) = server.curl_admin("DELETE", &format!("{path}?dryRun=All"), None, None);
    assert_eq!(code, 200, "{body}");
    assert!(
        json(&body)["items"].as_array().unwrap().len() >= 2,
        "{body}"
    );
    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        names.contains("configmap/a") && names.contains("configmap/b"),
        "{names}"
    );
}

#[test]
fn dry_run_on_a_single_delete_a_scale_and_a_binding_changes_nothing() {
    let server = Apiserver::start();
    server.kubectl_ok(&["create", "configmap", "a"]);
    let path = "/api/v1/namespaces/default/configmaps/a?dryRun=All";
    let (code, body) = server.curl_admin("DELETE", path, None, None);
    assert_eq!(code, 200, "{body}");
    server.kubectl_ok(&["get", "configmap", "a"]);

    server.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=1",
    ]);
    let out = server.kubectl_ok(&[
        "scale",
        "deployment",
        "web",
        "--replicas=5",
        "--dry-run=server",
    ]);
    assert!(out.contains("scaled (server dry run)"), "{out}");
    let replicas = server.kubectl_ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas.trim(), "1");

    server.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox}]}\n");
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}"#;
    let bind = "/api/v1/namespaces/default/pods/p/binding?dryRun=All";
    let (code, body) = server.curl_admin("POST", bind, Some("application/json"), Some(binding));
    assert_eq!(code, 201, "{body}");
    let node = server.kubectl_ok(&["get", "pod", "p", "-o", "jsonpath={.spec.nodeName}"]);
    assert_eq!(node.trim(), "", "a dry-run binding assigned the pod");
}

/// A ConfigMap `name` owned by the ConfigMap `owner` (by uid).
fn dependent(server: &Apiserver, name: &str, owner: &str) {
    let uid = server.kubectl_ok(&["get", "configmap", owner, "-o", "jsonpath={.metadata.uid}"]);
    server.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: {owner}\n    uid: {uid}\n"
    ));
}

#[test]
fn orphan_deletion_leaves_dependents_without_the_reference() {
    let server = Apiserver::start();
    server.kubectl_ok(&["create", "configmap", "owner"]);
    dependent(&server, "child", "owner");
    server.kubectl_ok(&["delete", "configmap", "owner", "--cascade=orphan"]);
    let refs = server.kubectl_ok(&[
        "get",
        "configmap",
        "child",
        "-o",
        "jsonpath={.metadata.ownerReferences}",
    ]);
    assert_eq!(refs.trim(), "", "child still names its deleted owner");
    let (code, _) = server.curl_admin(
        "DELETE",
        "/api/v1/namespaces/default/configmaps/child?propagationPolicy=Sideways",
        None,
        None,
    );
    assert_eq!(code, 422);
}

#[test]
fn foreground_deletion_removes_dependents_then_the_owner() {
    // A short Event TTL makes the server's housekeeping (which also lets go of owners whose
    // last dependent went by an update) run every half second.
    let server = Apiserver::start_with(&["--event-ttl", "2s"]);
    server.kubectl_ok(&["create", "configmap", "owner"]);
    dependent(&server, "child", "owner");
    // A dependent with a finalizer holds the owner back, marked, with foregroundDeletion.
    server.kubectl_ok(&["create", "configmap", "owner2"]);
    dependent(&server, "held", "owner2");
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);

    server.kubectl_ok(&[
        "delete",
        "configmap",
        "owner",
        "--cascade=foreground",
        "--wait=false",
    ]);
    server.kubectl_ok(&[
        "delete",
        "configmap",
        "owner2",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        !names.contains("configmap/owner\n") && !names.contains("configmap/child"),
        "{names}"
    );
    let held = server.kubectl_ok(&[
        "get",
        "configmap",
        "owner2",
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert_eq!(held.trim(), r#"["foregroundDeletion"]"#);
    assert!(names.contains("configmap/held"), "{names}");
    // Its last finalizer removed, the dependent goes, and the owner after it.
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    keelson_testing::eventually(
        "the owner to go",
        std::time::Duration::from_secs(30),
        || {
            let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
            match names.contains("owner2") || names.contains("held") {
                true => Err(names),
                false => Ok(()),
            }
        },
    );
}

#[test]
fn huge_grace_periods_are_clamped_and_the_pod_can_still_go() {
    let server = Apiserver::start();
    server.apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: busybox\n");
    let path = "/api/v1/namespaces/default/pods/p";
    let body = r#"{"gracePeriodSeconds": 9223372036854775807}"#;
    let (code, out) = server.curl_admin("DELETE", path, None, Some(body));
    assert_eq!(code, 200, "{out}");
    let pod = json(&out);
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 2147483647);
    assert!(pod["metadata"]["deletionTimestamp"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let (code, out) = server.curl_admin(
        "DELETE",
        &format!("{path}?gracePeriodSeconds=0"),
        None,
        None,
    );
    assert_eq!(code, 200, "{out}");
    let (code, _) = server.curl_admin("GET", path, None, None);
    assert_eq!(code, 404);
}

fn event(name: &str, last_timestamp: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: {name}\ninvolvedObject:\n  kind: Pod\n  name: p\n  namespace: default\nreason: Test\nmessage: m\ntype: Normal\nlastTimestamp: \"{last_timestamp}\"\n"
    )
}

#[test]
fn events_expire_after_the_event_ttl() {
    let server = Apiserver::start_with(&["--event-ttl", "2s"]);
    let now = chrono::Utc::now();
    let later = (now + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ");
    server.apply(&event("old", &now.format("%Y-%m-%dT%H:%M:%SZ").to_string()));
    server.apply(&event("seen-later", &later.to_string()));
    server.kubectl_ok(&["create", "configmap", "kept"]);
    keelson_testing::eventually(
        "the Event to expire",
        std::time::Duration::from_secs(30),
        || {
            let names = server.kubectl_ok(&["get", "events", "-o", "name"]);
            match names.contains("event/old") {
                true => Err(names),
                false => Ok(()),
            }
        },
    );
    let names = server.kubectl_ok(&["get", "events", "-o", "name"]);
    assert!(names.contains("event/seen-later"), "{names}");
    server.kubectl_ok(&["get", "configmap", "kept"]);
}

#[test]
fn every_acknowledged_object_is_there_after_kill_9() {
    let mut server = Apiserver::start();
    for i in 0..20 {
        server.kubectl_ok(&["create", "configmap", &format!("c{i}")]);
    }
    server.kubectl_ok(&["delete", "configmap", "c0"]);
    server.kill9();
    server.start_again();
    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    for i in 1..20 {
        assert!(
            names.contains(&format!("configmap/c{i}\n")),
            "c{i} lost: {names}"
        );
    }
    assert!(!names.contains("configmap/c0\n"), "{names}");
}
