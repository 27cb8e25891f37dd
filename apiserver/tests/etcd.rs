//! keelson-apiserver on a real etcd (`--etcd-servers`): kubectl create/get/watch/delete, a
//! restart, two API servers on one etcd, an etcd outage, and etcd with client-certificate TLS.

use keelson_testing::process::wait_until;
use keelson_testing::{Apiserver, ChildGuard, Etcd};
use std::path::Path;
use std::time::{Duration, Instant};

fn on(etcd: &Etcd) -> Vec<String> {
    vec!["--etcd-servers".into(), etcd.endpoints()]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `kubectl get configmaps --watch-only --output-watch-events` through `s`, its output in `log`.
fn watch_configmaps(s: &Apiserver, log: &Path) -> ChildGuard {
    let args = ["get", "configmaps", "--watch-only", "--output-watch-events"];
    let mut cmd = s.kubectl_cmd().command(&args);
    let child = ChildGuard::spawn_logged(&mut cmd, log);
    // A watch has no "started" line: give it the time to connect before the writes it must see.
    std::thread::sleep(Duration::from_secs(1));
    child
}

/// Waits until the watch printed these (event, name) rows, in this order.
fn wait_for_events(log: &Path, want: &[(&str, &str)]) {
    wait_until(
        "the watch to show the changes",
        Duration::from_secs(15),
        || {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let seen: Vec<(&str, &str)> = text
                .lines()
                .filter_map(|l| {
                    let mut cols = l.split_whitespace();
                    Some((cols.next()?, cols.next()?))
                })
                .filter(|(event, _)| *event != "EVENT")
                .collect();
            seen == want
        },
    );
}

fn etcd_value(etcd: &Etcd, key: &str) -> String {
    let out = etcd
        .etcdctl()
        .args(["get", key, "--print-value-only"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn kubectl_works_on_etcd_and_objects_survive_a_restart() {
    let etcd = Etcd::start();
    let mut s = Apiserver::start_with(&strs(&on(&etcd)));
    assert!(
        !s.dir.path().join("store.db").exists(),
        "SQLite is not used"
    );
    let log = s.dir.path().join("watch.log");
    let _watch = watch_configmaps(&s, &log);
    s.kubectl_ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    s.kubectl_ok(&["label", "configmap", "c1", "x=y"]);
    s.kubectl_ok(&["create", "configmap", "c2", "--from-literal=a=b"]);
    s.kubectl_ok(&["delete", "configmap", "c2"]);
    wait_for_events(
        &log,
        &[
            ("ADDED", "c1"),
            ("MODIFIED", "c1"),
            ("ADDED", "c2"),
            ("DELETED", "c2"),
        ],
    );
    let rv = s.kubectl_ok(&[
        "get",
        "configmap",
        "c1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let stored = etcd_value(&etcd, "/registry/core/configmaps/default/c1");
    assert!(stored.contains(r#""x":"y""#), "etcd holds {stored:?}");
    assert!(etcd_value(&etcd, "/registry/core/configmaps/default/c2").is_empty());
    // The resourceVersion is the etcd revision that wrote it.
    let out = etcd
        .etcdctl()
        .args(["get", "/registry/core/configmaps/default/c1", "-w", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kvs"][0]["mod_revision"].to_string(), rv);
    s.kill9();
    s.start_again();
    let after = s.kubectl_ok(&[
        "get",
        "configmap",
        "c1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert_eq!(after, rv);
    let out = s.kubectl(&["get", "configmap", "c2"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
}

#[test]
fn a_watch_on_one_server_sees_writes_through_another() {
    let etcd = Etcd::start();
    let flags = on(&etcd);
    let a = Apiserver::start_with(&strs(&flags));
    let b = Apiserver::start_sharing(&a, &strs(&flags));
    let log = a.dir.path().join("watch.log");
    let _watch = watch_configmaps(&a, &log);
    b.kubectl_ok(&["create", "configmap", "via-b", "--from-literal=a=b"]);
    // A read through A right after the write through B sees it (a consistent read).
    let got = a.kubectl_ok(&["get", "configmap", "via-b", "-o", "name"]);
    assert_eq!(got.trim(), "configmap/via-b");
    a.kubectl_ok(&["delete", "configmap", "via-b"]);
    let out = b.kubectl(&["get", "configmap", "via-b"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
    wait_for_events(&log, &[("ADDED", "via-b"), ("DELETED", "via-b")]);
}

#[test]
fn an_etcd_outage_is_503_and_not_ready_until_etcd_returns() {
    let mut etcd = Etcd::start();
    let s = Apiserver::start_with(&strs(&on(&etcd)));
    assert_eq!(
        s.curl("GET", "/readyz", None, None, None),
        (200, "ok".into())
    );
    etcd.kill(0);
    let started = Instant::now();
    let cm = r#"{"metadata":{"name":"c1"},"data":{"a":"b"}}"#;
    let (code, body) = s.curl_admin(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        None,
        Some(cm),
    );
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("ServiceUnavailable") && body.contains("etcd"),
        "{body}"
    );
    let out = s.kubectl(&["get", "configmaps"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("etcd") && stderr.contains("Connection refused"),
        "{stderr}"
    );
    let (code, body) = s.curl("GET", "/readyz?verbose", None, None, None);
    assert_eq!(code, 500);
    assert!(body.contains("[-]etcd failed"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "a write, a read and /readyz took {:?} with etcd down",
        started.elapsed()
    );
    let (code, body) = s.curl_admin("GET", "/readyz/etcd", None, None);
    assert_eq!(code, 500, "{body}");
    // What needs no storage answers as usual: the version and discovery.
    let (code, body) = s.curl("GET", "/version", None, None, None);
    assert_eq!(code, 200, "{body}");
    let (code, body) = s.curl_admin("GET", "/apis", None, None);
    assert!(code == 200 && body.contains("apps"), "{code} {body}");
    etcd.restart(0);
    wait_until("writes to work again", Duration::from_secs(20), || {
        s.kubectl(&["create", "configmap", "c1", "--from-literal=a=b"])
            .status
            .success()
    });
    let (code, body) = s.curl("GET", "/readyz?verbose", None, None, None);
    assert_eq!(code, 200);
    assert!(body.contains("[+]etcd ok"), "{body}");
    s.kubectl_ok(&["get", "configmap", "c1"]);
}

/// etcd as kubeadm runs it: HTTPS, client certificates required. The --etcd-cafile,
/// --etcd-certfile and --etcd-keyfile flags get the server in; etcd refuses a client without.
#[test]
fn etcd_with_client_certificates() {
    served_on_tls_etcd(Etcd::start_tls());
}

/// The PKI `keelson-apiserver etcd-pki` makes (scripts/up's local etcd): etcd serves with it and
/// takes the API server's client certificate; made again, it is kept (same CA).
#[test]
fn etcd_with_the_pki_etcd_pki_makes() {
    let made = |dir: &Path| {
        let pki = dir.join("pki");
        for _ in 0..2 {
            keelson_testing::process::run_ok(
                std::process::Command::new(keelson_testing::binary("keelson-apiserver"))
                    .args(["etcd-pki", "--dir"])
                    .arg(&pki),
            );
        }
        keelson_testing::tls::TestPki {
            ca: pki.join("ca.crt"),
            server_cert: pki.join("server.crt"),
            server_key: pki.join("server.key"),
            client_cert: pki.join("apiserver-etcd-client.crt"),
            client_key: pki.join("apiserver-etcd-client.key"),
        }
    };
    let etcd = Etcd::start_with_pki(|dir| {
        let pki = made(dir);
        let ca = std::fs::read(&pki.ca).unwrap();
        let again = made(dir);
        assert_eq!(std::fs::read(&again.ca).unwrap(), ca, "the CA is kept");
        pki
    });
    served_on_tls_etcd(etcd);
}

fn served_on_tls_etcd(etcd: Etcd) {
    let pki = etcd.tls.clone().unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let flags = [
        "--etcd-servers".to_string(),
        etcd.endpoints(),
        "--etcd-cafile".into(),
        path(&pki.ca),
        "--etcd-certfile".into(),
        path(&pki.client_cert),
        "--etcd-keyfile".into(),
        path(&pki.client_key),
    ];
    assert!(etcd.endpoints().starts_with("https://"));
    let s = Apiserver::start_with(&strs(&flags));
    s.kubectl_ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    assert!(etcd_value(&etcd, "/registry/core/configmaps/default/c1").contains(r#""a":"b""#));
    let (code, body) = s.curl("GET", "/readyz?verbose", None, None, None);
    assert_eq!(code, 200);
    assert!(body.contains("[+]etcd ok"), "{body}");
    // Without a client certificate etcd refuses: the flags above are what got the server in.
    let out = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &etcd.endpoints(), "--cacert", &path(&pki.ca)])
        .args([
            "--command-timeout",
            "3s",
            "get",
            "/registry/core/configmaps/default/c1",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "etcd served a client without a certificate"
    );
}
