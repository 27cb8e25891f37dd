//! The store and the server's lifecycle under careless or hostile use: a second server on the
//! same data directory, permissions, rows the server cannot decode, watches from the future,
//! dry-run and propagation on DELETE, Events' expiry.

use keelson_testing::Apiserver;
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
    let out = Command::new(bin())
        .arg("quarantine")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
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
        ],
    );
    server.start_again();
    let log = server.log();
    for key in ["broken", "deep", "list"] {
        assert!(
            log.contains(&format!("/core/configmaps/default/{key}")) && log.contains("quarantine"),
            "no quarantine line for {key}:\n{log}"
        );
    }
    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(names.contains("configmap/good"), "{names}");
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
    assert_eq!(lines, 3, "{}", server.log());
    server.kubectl_ok(&["get", "configmap", "good"]);
}
