use super::*;

fn lease(name: &str, address: &str, renewed: &str, seconds: i64) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "kube-system",
            "labels": { APISERVER_IDENTITY_LABEL: KUBE_APISERVER },
            "annotations": { APISERVER_ADVERTISE_ANNOTATION: address } },
        "spec": { "holderIdentity": name, "leaseDurationSeconds": seconds, "renewTime": renewed },
    })
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[test]
fn only_fresh_leases_are_endpoints_and_only_long_expired_ones_garbage() {
    let seen: Vec<Seen> = [
        lease(
            "apiserver-a",
            "10.0.0.1:6443",
            "2026-01-01T00:00:10.000000Z",
            15,
        ),
        lease(
            "apiserver-b",
            "10.0.0.2:6443",
            "2026-01-01T00:00:00.000000Z",
            15,
        ),
        lease(
            "apiserver-c",
            "10.0.0.3:6443",
            "2025-12-31T22:00:00.000000Z",
            15,
        ),
    ]
    .iter()
    .filter_map(read_lease)
    .collect();
    assert_eq!(seen.len(), 3);
    let now = at("2026-01-01T00:00:20Z");
    assert_eq!(fresh(&seen, now), vec!["10.0.0.1:6443".parse().unwrap()]);
    assert_eq!(stale(&seen, now), vec!["apiserver-c".to_string()]);
}

#[test]
fn leases_of_others_are_not_api_servers() {
    let mut other = lease("kube-scheduler", "10.0.0.9:1", "2026-01-01T00:00:00Z", 15);
    other["metadata"]["labels"] = json!({});
    assert_eq!(read_lease(&other), None);
    let renewed = lease("apiserver-a", "not an address", "2026-01-01T00:00:00Z", 15);
    let s = read_lease(&renewed).unwrap();
    assert_eq!(s.address, None);
    assert!(fresh(&[s], at("2026-01-01T00:00:01Z")).is_empty());
}
