use super::*;

fn owner(name: &str) -> Owner {
    Owner {
        namespace: "default".into(),
        name: name.into(),
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
}

fn seen(key: &str, name: &str, created: i64) -> Seen {
    Seen {
        key: key.into(),
        rev: 7,
        owner: Some(owner(name)),
        created: Some(at(created)),
    }
}

const GRACE: Duration = Duration::from_secs(60);

#[test]
fn records_what_a_service_holds_without_a_record() {
    let held = vec![("/k/1".to_string(), owner("web"))];
    let p = plan(&held, &[], at(0), GRACE);
    assert_eq!(p.record, held);
    assert!(p.free.is_empty());
}

#[test]
fn frees_an_old_record_no_service_holds_but_not_a_young_one() {
    let records = [seen("/k/old", "gone", 0), seen("/k/young", "coming", 100)];
    let p = plan(&[], &records, at(130), GRACE);
    assert_eq!(
        p.free,
        vec![Held {
            key: "/k/old".into(),
            rev: 7
        }]
    );
}

#[test]
fn keeps_held_records_and_reports_conflicts() {
    let held = vec![
        ("/k/1".to_string(), owner("web")),
        ("/k/2".to_string(), owner("db")),
    ];
    let records = [seen("/k/1", "web", 0), seen("/k/2", "other", 0)];
    let p = plan(&held, &records, at(1000), GRACE);
    assert!(p.record.is_empty());
    assert!(p.free.is_empty(), "{:?}", p.free);
    assert_eq!(
        p.conflicts,
        vec![("/k/2".to_string(), owner("db"), owner("other"))]
    );
}

#[test]
fn a_record_of_a_service_that_no_longer_uses_it_is_freed() {
    // web's port changed; its old record stayed behind (the release did not happen).
    let held = vec![("/k/new".to_string(), owner("web"))];
    let records = [seen("/k/new", "web", 0), seen("/k/old", "web", 0)];
    let p = plan(&held, &records, at(1000), GRACE);
    assert_eq!(p.free.len(), 1);
    assert_eq!(p.free[0].key, "/k/old");
}

#[test]
fn held_keys_are_the_cluster_ip_and_node_ports() {
    let svc = serde_json::json!({
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "clusterIP": "10.96.0.5", "ports": [{ "port": 80, "nodePort": 30080 }, { "port": 81 }] },
    });
    assert_eq!(
        held_keys(&svc),
        vec![
            "/allocations/serviceips/10.96.0.5".to_string(),
            "/allocations/servicenodeports/30080".to_string()
        ]
    );
    let headless = serde_json::json!({ "spec": { "clusterIP": "None" } });
    assert!(held_keys(&headless).is_empty());
}
