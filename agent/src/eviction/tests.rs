use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::pressure::Pressure;
use super::rank::{self, PodUsage};
use super::thresholds::{self, parse, Flags, Observation, Observations, Signal};

const MI: u64 = 1024 * 1024;

fn hard(text: &str) -> Vec<thresholds::Threshold> {
    parse(&Flags {
        hard: text.into(),
        ..Default::default()
    })
    .unwrap()
}

fn memory(available_mi: u64) -> Observations {
    BTreeMap::from([(
        Signal::MemoryAvailable,
        Observation {
            available: available_mi * MI,
            capacity: 1024 * MI,
        },
    )])
}

#[test]
fn flags_parse_as_the_kubelets_and_bad_ones_name_what_is_wrong() {
    let t = hard(thresholds::DEFAULT_HARD);
    assert_eq!(t.len(), 5);
    let nodefs = t
        .iter()
        .find(|t| t.signal == Signal::NodeFsAvailable)
        .unwrap();
    assert_eq!(nodefs.value.amount(1000), 100, "10% of the capacity");
    let soft = parse(&Flags {
        soft: "memory.available<500Mi".into(),
        soft_grace: "memory.available=1m30s".into(),
        min_reclaim: "memory.available=200Mi".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(soft[0].grace, Some(Duration::from_secs(90)));
    assert_eq!(soft[0].min_reclaim.as_ref().unwrap().amount(0), 200 * MI);
    let err = |f: Flags| parse(&f).unwrap_err();
    assert!(err(Flags {
        hard: "memory.free<1Mi".into(),
        ..Default::default()
    })
    .contains("unknown eviction signal \"memory.free\""));
    assert!(err(Flags {
        hard: "memory.available>1Mi".into(),
        ..Default::default()
    })
    .contains("expected signal<value"));
    assert!(err(Flags {
        hard: "nodefs.available<120%".into(),
        ..Default::default()
    })
    .contains("between 0% and 100%"));
    assert!(err(Flags {
        soft: "memory.available<1Gi".into(),
        ..Default::default()
    })
    .contains("needs a grace period"));
}

#[test]
fn pressure_follows_the_thresholds_and_stays_for_the_transition_period() {
    let t = hard("memory.available<100Mi");
    let mut p = Pressure::new(Duration::from_secs(30));
    let t0 = Instant::now();
    let calm = p.update(&t, &memory(500), t0);
    assert!(calm.conditions.is_empty() && calm.act_on.is_empty());
    let low = p.update(&t, &memory(50), t0 + Duration::from_secs(10));
    assert!(low.conditions.contains("MemoryPressure"));
    assert_eq!(low.act_on, vec![0]);
    // Recovered, yet the condition holds through the transition period, with nothing to evict.
    let after = p.update(&t, &memory(500), t0 + Duration::from_secs(20));
    assert!(after.conditions.contains("MemoryPressure") && after.act_on.is_empty());
    let cleared = p.update(&t, &memory(500), t0 + Duration::from_secs(41));
    assert!(cleared.conditions.is_empty());
}

#[test]
fn a_soft_threshold_evicts_after_its_grace_and_reclaim_holds_past_the_threshold() {
    let t = parse(&Flags {
        soft: "memory.available<100Mi".into(),
        soft_grace: "memory.available=1m".into(),
        min_reclaim: "memory.available=50Mi".into(),
        ..Default::default()
    })
    .unwrap();
    let mut p = Pressure::new(Duration::ZERO);
    let t0 = Instant::now();
    let first = p.update(&t, &memory(90), t0);
    assert!(
        first.conditions.contains("MemoryPressure"),
        "the condition at once"
    );
    assert!(
        first.act_on.is_empty(),
        "no eviction within the grace period"
    );
    assert_eq!(
        p.update(&t, &memory(90), t0 + Duration::from_secs(61))
            .act_on,
        vec![0]
    );
    // 120Mi is past the threshold but not past threshold + minimum reclaim: still acting.
    assert_eq!(
        p.update(&t, &memory(120), t0 + Duration::from_secs(71))
            .act_on,
        vec![0]
    );
    assert!(p
        .update(&t, &memory(160), t0 + Duration::from_secs(81))
        .act_on
        .is_empty());
}

fn pod(name: &str, priority: i32, request_mi: Option<u64>) -> Arc<Pod> {
    let resources = request_mi.map(|r| serde_json::json!({"requests": {"memory": format!("{r}Mi")}, "limits": {"memory": format!("{r}Mi")}}));
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": name},
            "spec": {"priority": priority, "containers": [{"name": "app", "resources": resources}]},
        }))
        .unwrap(),
    )
}

fn using(pod: Arc<Pod>, mi: u64) -> PodUsage {
    PodUsage {
        pod,
        memory: BTreeMap::from([("app".to_string(), mi * MI)]),
        disk: BTreeMap::new(),
    }
}

#[test]
fn pods_over_their_requests_go_first_then_by_priority_then_by_use_above_request() {
    let pods = vec![
        using(pod("guaranteed", 0, Some(200)), 150),
        using(pod("best-effort-small", 0, None), 50),
        using(pod("best-effort-big", 0, None), 300),
        using(pod("important", 1000, None), 400),
        using(pod("critical", 2_000_001_000, None), 900),
    ];
    let order: Vec<&str> = rank::rank(&pods, Signal::MemoryAvailable)
        .iter()
        .map(|p| p.pod.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "best-effort-big",
            "best-effort-small",
            "important",
            "guaranteed"
        ],
        "critical pods are never evicted"
    );
    let t = &hard("memory.available<100Mi")[0];
    let o = Observation {
        available: 60 * MI,
        capacity: 1024 * MI,
    };
    assert_eq!(
        rank::message(&pods[2], t, &o),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. Container app was using 300Mi, request is 0, has larger consumption of memory. "
    );
}

#[test]
fn allocatable_is_capacity_less_reserved_and_the_hard_thresholds() {
    use crate::node::allocatable::{allocatable, pods_memory, Reserved};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity("2".into())),
        ("memory".to_string(), Quantity("4Gi".into())),
        ("ephemeral-storage".to_string(), Quantity("100Gi".into())),
        ("pods".to_string(), Quantity("110".into())),
    ]);
    let reserved = Reserved::parse("cpu=100m,memory=512Mi")
        .unwrap()
        .plus(&Reserved::parse("memory=512Mi,ephemeral-storage=10Gi").unwrap());
    let a = allocatable(&capacity, &reserved, &hard(thresholds::DEFAULT_HARD));
    assert_eq!(a["cpu"].0, "1900m");
    assert_eq!(a["memory"].0, format!("{}Ki", (4096 - 1024 - 100) * 1024));
    // 100Gi less 10Gi reserved and 10% of the capacity for nodefs.available.
    assert_eq!(a["ephemeral-storage"].0, format!("{}Ki", 80 * 1024 * 1024));
    assert_eq!(a["pods"].0, "110");
    assert_eq!(pods_memory(&capacity, &reserved), Some(3072 * MI));
    assert!(Reserved::parse("gpu=1")
        .unwrap_err()
        .contains("only cpu, memory"));
    assert!(Reserved::parse("memory=lots")
        .unwrap_err()
        .contains("not a quantity"));
}

#[test]
fn under_pressure_new_pods_are_admitted_as_the_kubelet_admits_them() {
    use super::admit::admit;
    use std::collections::BTreeSet;
    let best_effort = pod("be", 0, None);
    let burstable = pod("g", 0, Some(100));
    let critical = pod("c", 2_000_001_000, None);
    let memory = BTreeSet::from(["MemoryPressure"]);
    let disk = BTreeSet::from(["DiskPressure", "MemoryPressure"]);
    assert!(admit(&best_effort, &BTreeSet::new()).is_ok());
    let r = admit(&best_effort, &memory).unwrap_err();
    assert_eq!(
        (r.reason, r.message.as_str()),
        ("Evicted", "The node had condition: [MemoryPressure]. ")
    );
    assert!(admit(&burstable, &memory).is_ok());
    assert!(admit(&critical, &disk).is_ok());
    let r = admit(&burstable, &disk).unwrap_err();
    assert_eq!(
        r.message,
        "The node had condition: [DiskPressure MemoryPressure]. "
    );
    let mut tolerant = (*best_effort).clone();
    tolerant.spec.as_mut().unwrap().tolerations = Some(vec![serde_json::from_value(
        serde_json::json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
    )
    .unwrap()]);
    assert!(admit(&tolerant, &memory).is_ok());
}
