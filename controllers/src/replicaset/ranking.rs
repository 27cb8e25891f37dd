//! Which Pods a ReplicaSet deletes first when it scales down: upstream's ActivePodsWithRanks
//! order, with the LogarithmicScaleDown and PodDeletionCost features on (their 1.32 defaults).

use crate::pods::is_ready;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::POD_DELETION_COST_ANNOTATION;
use kube::ResourceExt;
use std::cmp::Reverse;
use std::collections::HashMap;

fn node(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// Pending < Unknown < Running (any other phase counts as Pending, as upstream's map).
fn phase_ordinal(p: &Pod) -> u8 {
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    }
}

fn deletion_cost(p: &Pod) -> i32 {
    p.annotations()
        .get(POD_DELETION_COST_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn ready_since(p: &Pod) -> Option<Timestamp> {
    let cs = p.status.as_ref()?.conditions.as_ref()?;
    let c = cs
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    c.last_transition_time.as_ref().map(|t| t.0)
}

/// (regular, restartable init) containers' highest restart counts.
fn max_restarts(p: &Pod) -> (i32, i32) {
    let st = p.status.as_ref();
    let regular = st
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    let sidecars: Vec<&str> = p
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = st
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    (regular, sidecar)
}

/// Upstream's LogarithmicScaleDown: a time's power-of-two age bucket (a missing time first;
/// a newer time has a smaller bucket, and goes first).
fn age_bucket(t: Option<Timestamp>, now: Timestamp) -> i64 {
    let Some(t) = t else { return i64::MIN };
    let nanos = now.duration_since(t).as_nanos();
    if nanos > 0 {
        (nanos as f64).log2() as i64
    } else {
        -1
    }
}

/// Where a Pod of a ReplicaSet stands in the deletion order (smaller deletes first). `rank` is
/// how many active Pods of the same owner share a Pod's node (doubled up goes first).
///
/// Upstream's ActivePodsWithRanks in order: unscheduled, phase, not ready, deletion cost,
/// doubled up, ready for less time, more restarts, created more recently. Upstream compares
/// ready times pairwise (equal times fall through to restarts, different ones in one bucket go by
/// uid), which is no total order: Go's sort tolerates that, Rust's panics ("does not correctly
/// implement a total order"; it brought the controller manager down while 27 Pods became Ready
/// in the same second). Here a bucket is compared whole and the uid breaks the last tie, so the
/// order is total and differs from upstream's only among Pods of the same bucket.
type Key = (
    bool,
    u8,
    bool,
    i32,
    Reverse<usize>,
    i64,
    Reverse<(i32, i32)>,
    i64,
    String,
);

fn key(p: &Pod, rank: &HashMap<String, usize>, now: Timestamp) -> Key {
    let ready = is_ready(p);
    let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    (
        !node(p).is_empty(),
        phase_ordinal(p),
        ready,
        deletion_cost(p),
        Reverse(rank.get(node(p)).copied().unwrap_or(0)),
        if ready {
            age_bucket(ready_since(p), now)
        } else {
            0
        },
        Reverse(max_restarts(p)),
        age_bucket(created, now),
        p.uid().unwrap_or_default(),
    )
}

/// The names of the `n` Pods to delete first out of `pods`; `related` are the active Pods of
/// every ReplicaSet with the same owner (for the doubled-up rank).
pub fn to_delete(pods: &[&Pod], related: &[&Pod], n: usize, now: Timestamp) -> Vec<String> {
    let mut rank: HashMap<String, usize> = HashMap::new();
    for p in related {
        *rank.entry(node(p).to_string()).or_default() += 1;
    }
    let mut sorted: Vec<&Pod> = pods.to_vec();
    if n < sorted.len() {
        sorted.sort_by_cached_key(|p| key(p, &rank, now));
    }
    sorted.iter().take(n).map(|p| p.name_any()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::cmp::Ordering;
    use std::time::Duration;

    /// The deletion order of two Pods: Less deletes `a` first.
    fn compare(a: &Pod, b: &Pod, rank: &HashMap<String, usize>, now: Timestamp) -> Ordering {
        key(a, rank, now).cmp(&key(b, rank, now))
    }

    fn on(name: &str, node: &str, ready: bool, phase: &str) -> Pod {
        let mut p = pod(name, ready, phase);
        p.spec.as_mut().unwrap().node_name = (!node.is_empty()).then(|| node.to_string());
        p
    }

    fn order(pods: &[Pod]) -> Vec<String> {
        let refs: Vec<&Pod> = pods.iter().collect();
        to_delete(&refs[..], &refs[..], pods.len() - 1, Timestamp::now())
            .into_iter()
            .chain(Some("-".into()))
            .collect()
    }

    #[test]
    fn unscheduled_then_pending_then_unknown_then_not_ready_go_first() {
        let pods = [
            on("ready", "n1", true, "Running"),
            on("unready", "n2", false, "Running"),
            on("unknown", "n3", false, "Unknown"),
            on("pending", "n4", false, "Pending"),
            on("unscheduled", "", false, "Pending"),
        ];
        assert_eq!(
            order(&pods),
            ["unscheduled", "pending", "unknown", "unready", "-"]
        );
    }

    #[test]
    fn lower_deletion_cost_then_doubled_up_go_first() {
        let mut cheap = on("cheap", "n3", true, "Running");
        cheap.metadata.annotations =
            Some([(POD_DELETION_COST_ANNOTATION.to_string(), "-5".to_string())].into());
        let pods = [
            on("alone", "n1", true, "Running"),
            on("crowded", "n2", true, "Running"),
            on("crowded2", "n2", true, "Running"),
            cheap,
        ];
        let got = order(&pods);
        assert_eq!(got[0], "cheap");
        assert!(
            got[1].starts_with("crowded") && got[2].starts_with("crowded"),
            "{got:?}"
        );
    }

    #[test]
    fn restarts_then_newest_go_first() {
        let now = Timestamp::now();
        let mut old = on("old", "n1", false, "Running");
        old.metadata.creation_timestamp = Some(Time(now - Duration::from_secs(86_400)));
        let mut young = on("young", "n2", false, "Running");
        young.metadata.creation_timestamp = Some(Time(now - Duration::from_secs(60)));
        let mut crashy = on("crashy", "n3", false, "Running");
        crashy.metadata.creation_timestamp = old.metadata.creation_timestamp.clone();
        crashy.status.as_mut().unwrap().container_statuses = Some(vec![serde_json::from_value(
            serde_json::json!({"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 4}),
        )
        .unwrap()]);
        let rank = HashMap::new();
        assert_eq!(compare(&crashy, &young, &rank, now), Ordering::Less);
        assert_eq!(compare(&young, &old, &rank, now), Ordering::Less);
    }

    /// 30 Pods became Ready within two seconds (same age bucket, some at the same instant), and
    /// their uids sort against their creation: upstream's pairwise rule made a cycle here, and
    /// the sort panicked.
    #[test]
    fn pods_ready_in_the_same_second_have_a_total_order() {
        let now = Timestamp::now();
        let pods: Vec<Pod> = (0..30)
            .map(|i| {
                let mut p = on(&format!("p{i:02}"), "n1", true, "Running");
                p.metadata.uid = Some(format!("uid-{:02}", 29 - i));
                p.metadata.creation_timestamp =
                    Some(Time(now - Duration::from_secs(600 + (i % 7) as u64)));
                let since = now - Duration::from_secs(300 + (i % 2) as u64);
                let ready = &mut p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
                ready.last_transition_time = Some(Time(since));
                p
            })
            .collect();
        let rank = HashMap::from([("n1".to_string(), 30)]);
        for a in &pods {
            for b in &pods {
                let ab = compare(a, b, &rank, now);
                assert_eq!(ab, compare(b, a, &rank, now).reverse());
                for c in &pods {
                    if ab != Ordering::Greater && compare(b, c, &rank, now) != Ordering::Greater {
                        assert_ne!(compare(a, c, &rank, now), Ordering::Greater);
                    }
                }
            }
        }
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(to_delete(&refs, &refs, 27, now).len(), 27);
    }
}
