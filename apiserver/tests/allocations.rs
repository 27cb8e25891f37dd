//! ClusterIP and NodePort allocations kept in the store: a failed create gives back what it
//! took, a dry run takes nothing, and the repair pass at start records what Services hold and
//! frees what none holds.

use keelson_testing::Apiserver;
use std::path::Path;

/// A Service manifest asking for `ip` and, when given, a NodePort.
fn service(name: &str, ip: &str, node_port: Option<u16>) -> String {
    let (kind, port) = match node_port {
        Some(p) => ("NodePort", format!(", nodePort: {p}")),
        None => ("ClusterIP", String::new()),
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec: {{type: {kind}, clusterIP: {ip}, ports: [{{port: 80{port}}}]}}\n"
    )
}

/// Creates a Service; (success, stdout + stderr).
fn create(s: &Apiserver, yaml: &str, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["create", "-f", "-"];
    args.extend_from_slice(extra);
    let out = s.kubectl_stdin(&args, yaml);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn a_failed_create_gives_back_what_it_took_and_a_dry_run_takes_nothing() {
    let s = Apiserver::start_with(&["--service-cluster-ip-range", "10.96.0.0/24"]);
    let (ok, out) = create(&s, &service("first", "10.96.0.20", Some(30080)), &[]);
    assert!(ok, "{out}");
    // 10.96.0.21 is free, the port is not: nothing is created and the address is given back.
    let (ok, out) = create(&s, &service("second", "10.96.0.21", Some(30080)), &[]);
    assert!(
        !ok && out.contains("provided port 30080 is already allocated"),
        "{out}"
    );
    let (ok, out) = create(&s, &service("third", "10.96.0.21", None), &[]);
    assert!(ok, "the address of the failed create stayed taken: {out}");
    // A dry run answers with the address but keeps it free.
    let (ok, out) = create(
        &s,
        &service("dry", "10.96.0.22", Some(30081)),
        &["--dry-run=server"],
    );
    assert!(ok, "{out}");
    let (ok, out) = create(&s, &service("real", "10.96.0.22", Some(30081)), &[]);
    assert!(ok, "the dry run kept its allocations: {out}");
    // Deleting a NodePort Service frees its port and address.
    s.kubectl_ok(&["delete", "service", "first"]);
    let (ok, out) = create(&s, &service("again", "10.96.0.20", Some(30080)), &[]);
    assert!(
        ok,
        "the deleted Service's address or port stayed taken: {out}"
    );
}

/// Runs SQL on a stopped server's store.
fn sql(db: &Path, statement: &str, params: &[&dyn rusqlite::ToSql]) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(statement, params).unwrap();
}

/// An allocation record for `default/<owner>` created at `created`, as a server stores it.
fn record(key: &str, owner: &str, created: &str) -> String {
    let name = key.rsplit('/').next().unwrap();
    serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": { "name": name, "creationTimestamp": created },
        "spec": { "parentRef": { "group": "", "resource": "services", "namespace": "default", "name": owner } },
    })
    .to_string()
}

#[test]
fn the_repair_pass_at_start_records_held_allocations_and_frees_leaked_ones() {
    let mut s = Apiserver::start_with(&["--service-cluster-ip-range", "10.96.0.0/24"]);
    let (ok, out) = create(&s, &service("web", "10.96.0.30", Some(30090)), &[]);
    assert!(ok, "{out}");
    s.stop();
    let db = s.dir.path().join("store.db");
    // As data from before allocation records: web's records are gone.
    sql(&db, "DELETE FROM objects WHERE key LIKE '/allocations/%/10.96.0.30' OR key LIKE '/allocations/%/30090'", &[]);
    // Leaks: records of Services that were never stored, one old, one just made.
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let leaks = [
        (
            "/allocations/serviceips/10.96.0.31",
            "gone",
            "2020-01-01T00:00:00Z",
        ),
        (
            "/allocations/servicenodeports/30091",
            "gone",
            "2020-01-01T00:00:00Z",
        ),
        ("/allocations/serviceips/10.96.0.32", "coming", now.as_str()),
    ];
    for (key, owner, created) in leaks {
        let value = record(key, owner, created);
        sql(
            &db,
            "INSERT INTO objects (key, rev, value) VALUES (?1, (SELECT MAX(rev) FROM objects), ?2)",
            &[&key, &value.as_bytes()],
        );
    }
    s.start_again();
    let (ok, out) = create(&s, &service("web-ip", "10.96.0.30", None), &[]);
    assert!(
        !ok && out.contains("already allocated"),
        "web's address was not recorded again: {out}"
    );
    let (ok, out) = create(&s, &service("web-port", "10.96.0.40", Some(30090)), &[]);
    assert!(
        !ok && out.contains("already allocated"),
        "web's port was not recorded again: {out}"
    );
    let (ok, out) = create(&s, &service("leak", "10.96.0.31", Some(30091)), &[]);
    assert!(ok, "the old leaked address or port was not freed: {out}");
    // A young record may belong to a create in flight on another server: it stays.
    let (ok, out) = create(&s, &service("young", "10.96.0.32", None), &[]);
    assert!(!ok && out.contains("already allocated"), "{out}");
    assert!(
        s.log().contains("freeing an allocation no Service holds"),
        "{}",
        s.log()
    );
}

#[test]
fn an_update_that_drops_a_port_or_the_address_gives_them_back() {
    let s = Apiserver::start_with(&["--service-cluster-ip-range", "10.96.0.0/24"]);
    let (ok, out) = create(&s, &service("web", "10.96.0.50", Some(30100)), &[]);
    assert!(ok, "{out}");
    let to_cluster_ip = r#"[{"op":"replace","path":"/spec/type","value":"ClusterIP"},{"op":"remove","path":"/spec/ports/0/nodePort"}]"#;
    s.kubectl_ok(&[
        "patch",
        "service",
        "web",
        "--type=json",
        "-p",
        to_cluster_ip,
    ]);
    let (ok, out) = create(&s, &service("port", "10.96.0.51", Some(30100)), &[]);
    assert!(ok, "the port dropped by the update stayed taken: {out}");
    let external = r#"{"spec":{"type":"ExternalName","externalName":"example.test","clusterIP":null,"clusterIPs":null}}"#;
    s.kubectl_ok(&["patch", "service", "web", "-p", external]);
    let (ok, out) = create(&s, &service("ip", "10.96.0.50", None), &[]);
    assert!(
        ok,
        "the address given up by ExternalName stayed taken: {out}"
    );
}
