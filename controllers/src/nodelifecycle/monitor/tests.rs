use super::*;

const GRACE: Duration = Duration::from_secs(40);

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn node(ready: Option<&str>, taints: serde_json::Value) -> Node {
    let conditions = match ready {
        Some(status) => serde_json::json!([
            { "type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2023-11-14T22:13:20Z" },
            { "type": "Ready", "status": status, "lastHeartbeatTime": "2023-11-14T22:13:20Z" },
        ]),
        None => serde_json::json!([]),
    };
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "n1" },
        "spec": { "taints": taints },
        "status": { "conditions": conditions },
    }))
    .unwrap()
}

fn status_of(cs: &[NodeCondition], kind: &str) -> String {
    cs.iter().find(|c| c.type_ == kind).unwrap().status.clone()
}

#[test]
fn probes_measure_from_the_last_change_seen_by_our_clock() {
    let mut probes = Probes::default();
    let beat = |s| Heartbeat {
        lease_renewed: Some(at(s)),
        ready_heartbeat: None,
    };
    assert_eq!(probes.observe("n1", beat(0), at(100)), at(100));
    assert_eq!(probes.observe("n1", beat(0), at(130)), at(100));
    // A renewal that the node stamps with a skewed clock still counts as a change now.
    assert_eq!(probes.observe("n1", beat(-500), at(131)), at(131));
    probes.retain(|n| n != "n1");
    assert_eq!(probes.observe("n1", beat(-500), at(200)), at(200));
}

#[test]
fn within_the_grace_period_a_ready_node_is_left_alone() {
    let n = node(Some("True"), serde_json::json!([]));
    assert_eq!(plan(&n, at(0), at(40), GRACE), NodeUpdate::default());
}

#[test]
fn a_silent_node_turns_unknown_and_gets_the_unreachable_taint() {
    let n = node(
        Some("True"),
        serde_json::json!([{ "key": "gpu", "effect": "NoSchedule" }]),
    );
    let u = plan(&n, at(0), at(41), GRACE);
    let cs = u.conditions.unwrap();
    assert_eq!(status_of(&cs, "Ready"), "Unknown");
    assert_eq!(status_of(&cs, "MemoryPressure"), "Unknown");
    let ready = cs.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason.as_deref(), Some(UNKNOWN_REASON));
    assert_eq!(ready.message.as_deref(), Some(UNKNOWN_MESSAGE));
    assert_eq!(ready.last_transition_time, Some(Time(at(41))));
    assert!(
        ready.last_heartbeat_time.is_some(),
        "the last heartbeat is kept"
    );
    let taints = u.taints.unwrap();
    assert_eq!(taints.len(), 3, "the user's taint stays: {taints:?}");
    assert_eq!(taints[1].key, UNREACHABLE_TAINT);
    assert_eq!(taints[1].effect, "NoExecute");
    assert_eq!(taints[1].time_added, Some(Time(at(41))));
    assert_eq!(
        (taints[2].key.as_str(), taints[2].effect.as_str()),
        (UNREACHABLE_TAINT, "NoSchedule")
    );
}

#[test]
fn a_node_already_marked_is_not_written_again() {
    let n = node(
        Some("Unknown"),
        serde_json::json!([
            { "key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": "2023-11-14T22:14:00Z" },
            { "key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": "2023-11-14T22:14:00Z" },
        ]),
    );
    let mut n = n;
    for c in n
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .iter_mut()
    {
        c.status = "Unknown".into();
    }
    assert_eq!(plan(&n, at(0), at(500), GRACE), NodeUpdate::default());
}

#[test]
fn a_node_that_never_posted_status_gets_ready_unknown_after_the_grace_period() {
    let n = node(None, serde_json::json!(null));
    assert_eq!(plan(&n, at(0), at(10), GRACE), NodeUpdate::default());
    let u = plan(&n, at(0), at(41), GRACE);
    let cs = u.conditions.unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].reason.as_deref(), Some(NEVER_REASON));
    assert_eq!(u.taints.unwrap()[0].key, UNREACHABLE_TAINT);
}

#[test]
fn ready_false_gets_not_ready_instead_of_unreachable() {
    let n = node(
        Some("False"),
        serde_json::json!([{ "key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": "2023-11-14T22:14:00Z" }]),
    );
    let taints = plan(&n, at(0), at(1), GRACE).taints.unwrap();
    let keys: Vec<(&str, &str)> = taints
        .iter()
        .map(|t| (t.key.as_str(), t.effect.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (NOT_READY_TAINT, "NoExecute"),
            (NOT_READY_TAINT, "NoSchedule")
        ]
    );
    assert_eq!(taints[0].time_added, Some(Time(at(1))));
}

#[test]
fn recovery_removes_the_health_taints_and_keeps_the_others() {
    let n = node(
        Some("True"),
        serde_json::json!([
            { "key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": "2023-11-14T22:14:00Z" },
            { "key": NOT_READY_TAINT, "effect": "NoSchedule" },
            { "key": "gpu", "effect": "NoSchedule" },
        ]),
    );
    let taints = plan(&n, at(0), at(1), GRACE).taints.unwrap();
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        ("gpu", "NoSchedule")
    );
}

#[test]
fn pressure_conditions_and_unschedulable_get_their_no_schedule_taints() {
    let mut n = node(Some("True"), serde_json::json!([]));
    let conditions = n.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions[0].status = "True".into();
    n.spec.as_mut().unwrap().unschedulable = Some(true);
    let taints = plan(&n, at(0), at(1), GRACE).taints.unwrap();
    let keys: Vec<(&str, &str)> = taints
        .iter()
        .map(|t| (t.key.as_str(), t.effect.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (MEMORY_PRESSURE_TAINT, "NoSchedule"),
            (UNSCHEDULABLE_TAINT, "NoSchedule")
        ]
    );
    // Once the pressure is gone, so is its taint (and only that one).
    let mut n2 = n.clone();
    n2.spec.as_mut().unwrap().taints = Some(taints);
    n2.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    let left = plan(&n2, at(0), at(2), GRACE).taints.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].key, UNSCHEDULABLE_TAINT);
}
