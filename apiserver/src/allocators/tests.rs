use super::*;
use crate::store::SqliteBackend;
use std::time::Duration;

/// A store on SQLite in a temporary directory (kept alive with it).
fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let backend = SqliteBackend::open(&dir.path().join("store.db")).unwrap();
    let store = Store::open(backend, Duration::from_secs(60), 100, check_record).unwrap();
    (store, dir)
}

fn small() -> Allocators {
    Allocators::new("10.96.0.0/30".parse().unwrap(), 30000..=30001)
}

fn owner(name: &str) -> Owner {
    Owner {
        namespace: "default".into(),
        name: name.into(),
    }
}

#[tokio::test]
async fn hands_out_each_ip_once_and_never_network_or_broadcast() {
    let (s, _dir) = store();
    let a = small();
    let (ip1, h1) = a.allocate_ip(&s, None, &owner("a"), false).await.unwrap();
    let (ip2, _) = a.allocate_ip(&s, None, &owner("b"), false).await.unwrap();
    let mut got = vec![ip1, ip2];
    got.sort();
    assert_eq!(
        got,
        vec![Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::new(10, 96, 0, 2)]
    );
    let full = a.allocate_ip(&s, None, &owner("c"), false).await;
    assert_eq!(full, Err(AllocError::IpExhausted(a.range())));
    // The records are in the store, naming their Service.
    let rec = s.get(&ip_key(ip1)).unwrap();
    assert_eq!(records::owner_of(&rec.obj), Some(owner("a")));
    undo(&s, h1.unwrap()).await;
    let (again, _) = a.allocate_ip(&s, None, &owner("c"), false).await.unwrap();
    assert_eq!(again, ip1);
}

#[tokio::test]
async fn asked_for_ip_must_be_free_and_in_range() {
    let (s, _dir) = store();
    let a = small();
    let ip = Ipv4Addr::new(10, 96, 0, 2);
    let o = owner("a");
    assert_eq!(a.allocate_ip(&s, Some(ip), &o, false).await.unwrap().0, ip);
    assert_eq!(
        a.allocate_ip(&s, Some(ip), &owner("b"), false).await,
        Err(AllocError::IpTaken(ip))
    );
    for bad in [Ipv4Addr::new(10, 97, 0, 1), Ipv4Addr::new(10, 96, 0, 3)] {
        let got = a.allocate_ip(&s, Some(bad), &o, false).await;
        assert!(
            matches!(got, Err(AllocError::IpOutOfRange(..))),
            "{bad}: {got:?}"
        );
    }
}

#[tokio::test]
async fn node_ports_in_range_once() {
    let (s, _dir) = store();
    let a = small();
    let o = owner("a");
    assert_eq!(
        a.allocate_port(&s, Some(30001), &o, false).await.unwrap().0,
        30001
    );
    assert_eq!(
        a.allocate_port(&s, Some(30001), &o, false).await,
        Err(AllocError::PortTaken(30001))
    );
    assert_eq!(a.allocate_port(&s, None, &o, false).await.unwrap().0, 30000);
    assert_eq!(
        a.allocate_port(&s, None, &o, false).await,
        Err(AllocError::PortsExhausted(30000, 30001))
    );
    assert!(matches!(
        a.allocate_port(&s, Some(80), &o, false).await,
        Err(AllocError::PortOutOfRange(..))
    ));
}

#[tokio::test]
async fn a_dry_run_stores_nothing() {
    let (s, _dir) = store();
    let a = small();
    let (ip, held) = a.allocate_ip(&s, None, &owner("a"), true).await.unwrap();
    assert_eq!(held, None);
    assert!(s.get(&ip_key(ip)).is_none());
    let (p, held) = a
        .allocate_port(&s, Some(30000), &owner("a"), true)
        .await
        .unwrap();
    assert_eq!((p, held), (30000, None));
    assert!(s.list(PORT_PREFIX).0.is_empty());
}

#[tokio::test]
async fn release_frees_only_the_owners_record() {
    let (s, _dir) = store();
    let a = small();
    let (p, _) = a.allocate_port(&s, None, &owner("a"), false).await.unwrap();
    release(&s, &port_key(p), &owner("b")).await;
    assert!(
        s.get(&port_key(p)).is_some(),
        "another Service's release freed it"
    );
    release(&s, &port_key(p), &owner("a")).await;
    assert!(s.get(&port_key(p)).is_none());
}

#[tokio::test]
async fn undo_leaves_a_record_changed_since() {
    let (s, _dir) = store();
    let a = small();
    let (p, held) = a.allocate_port(&s, None, &owner("a"), false).await.unwrap();
    let key = port_key(p);
    // Someone (a repair pass) rewrote the record meanwhile.
    let w = Write {
        key: key.clone(),
        value: Some(records::record(&key, &p.to_string(), &owner("b"))),
        precondition: Precondition::MustExist,
    };
    s.write(w).await.unwrap();
    undo(&s, held.unwrap()).await;
    assert!(s.get(&key).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_allocations_never_share_an_address() {
    let (s, _dir) = store();
    let a = std::sync::Arc::new(Allocators::new(
        "10.96.0.0/27".parse().unwrap(),
        30000..=30001,
    ));
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let (a, s) = (a.clone(), s.clone());
            tokio::spawn(
                async move { a.allocate_ip(&s, None, &owner(&i.to_string()), false).await },
            )
        })
        .collect();
    let mut got = std::collections::HashSet::new();
    for t in tasks {
        let (ip, _) = t.await.unwrap().unwrap();
        assert!(got.insert(ip), "{ip} handed out twice");
    }
    assert_eq!(s.list(IP_PREFIX).0.len(), 30);
}

#[test]
fn records_are_checked_at_load() {
    let key = ip_key(Ipv4Addr::new(10, 96, 0, 9));
    let good = records::record(&key, "10.96.0.9", &owner("web"));
    assert_eq!(check_record(&key, &good), Ok(()));
    let misnamed = records::record(&key, "10.96.0.8", &owner("web"));
    assert!(check_record(&key, &misnamed).is_err());
    assert!(check_record(&format!("{PORT_PREFIX}0"), &good).is_err());
    let unowned = serde_json::json!({ "metadata": { "name": "10.96.0.9" } });
    assert!(check_record(&key, &unowned).is_err());
    assert!(check_record("/nothing/here", &good).is_err());
}
