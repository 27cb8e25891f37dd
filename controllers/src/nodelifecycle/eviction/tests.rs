use super::*;
use keelson_apimachinery::well_known::{NOT_READY_TAINT, UNREACHABLE_TAINT};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        value: None,
        time_added: None,
    }
}

fn pod(name: &str, tolerations: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }], "tolerations": tolerations },
    }))
    .unwrap()
}

fn names(e: &Evictions) -> Vec<String> {
    e.now
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

#[test]
fn untolerated_goes_at_once_tolerated_after_its_seconds_from_time_added() {
    let taints = [taint(UNREACHABLE_TAINT, "NoExecute")];
    let pods = [
        pod("plain", serde_json::json!([])),
        pod(
            "two-seconds",
            serde_json::json!([{ "key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2 }]),
        ),
        pod(
            "daemon",
            serde_json::json!([{ "key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute" }]),
        ),
        pod(
            "other-key",
            serde_json::json!([{ "key": NOT_READY_TAINT, "operator": "Exists" }]),
        ),
    ];
    let added = |_: &Taint| at(10);
    let e = plan(&pods, &taints, added, at(11));
    assert_eq!(names(&e), ["plain", "other-key"]);
    assert_eq!(
        e.next,
        Some(at(12)),
        "two-seconds falls due 2 s after timeAdded"
    );
    let e = plan(&pods, &taints, added, at(12));
    assert_eq!(names(&e), ["plain", "two-seconds", "other-key"]);
    assert_eq!(e.next, None, "the DaemonSet-style toleration never expires");
}

#[test]
fn no_execute_only_and_the_shortest_seconds_win() {
    let taints = [
        taint("gpu", "NoSchedule"),
        taint(NOT_READY_TAINT, "NoExecute"),
    ];
    let pods = [pod(
        "p",
        serde_json::json!([
            { "key": NOT_READY_TAINT, "operator": "Exists", "tolerationSeconds": 300 },
            { "operator": "Exists", "tolerationSeconds": 5 },
            { "key": NOT_READY_TAINT, "operator": "Exists" },
        ]),
    )];
    let e = plan(&pods, &taints, |_| at(0), at(1));
    assert!(e.now.is_empty(), "the NoSchedule taint evicts nothing");
    assert_eq!(e.next, Some(at(5)));
}

#[test]
fn pods_already_terminating_are_left_to_finish() {
    let mut p = pod("going", serde_json::json!([]));
    p.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    let e = plan(
        [&p],
        &[taint(UNREACHABLE_TAINT, "NoExecute")],
        |_| at(0),
        at(1),
    );
    assert_eq!(e, Evictions::default());
}

#[test]
fn taints_without_time_added_count_from_when_they_were_first_seen() {
    let mut seen = FirstSeen::default();
    let t = taint("maintenance", "NoExecute");
    assert_eq!(seen.added("n1", &t, at(5)), at(5));
    assert_eq!(seen.added("n1", &t, at(9)), at(5));
    let stamped = Taint {
        time_added: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(1))),
        ..t.clone()
    };
    assert_eq!(seen.added("n1", &stamped, at(9)), at(1));
    seen.retain(|_, _| false);
    assert_eq!(seen.added("n1", &t, at(20)), at(20));
}
