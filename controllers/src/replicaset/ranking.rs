//! Which Pods a ReplicaSet deletes first when it scales down: upstream's ActivePodsWithRanks
//! order, with the LogarithmicScaleDown and PodDeletionCost features on (their 1.32 defaults).

use crate::pods::is_ready;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::POD_DELETION_COST_ANNOTATION;
use kube::ResourceExt;
use std::cmp::Ordering;
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

/// Upstream's afterOrZero then LogarithmicScaleDown: a missing time first; times in the same
/// power-of-two age bucket compare by uid, otherwise the newer first.
fn newer_first(
    a: Option<Timestamp>,
    b: Option<Timestamp>,
    ua: &str,
    ub: &str,
    now: Timestamp,
) -> Ordering {
    let (a, b) = match (a, b) {
        (None, _) => return Ordering::Less,
        (_, None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let bucket = |t: Timestamp| {
        let nanos = now.duration_since(t).as_nanos();
        if nanos > 0 {
            (nanos as f64).log2() as i64
        } else {
            -1
        }
    };
    match bucket(a).cmp(&bucket(b)) {
        Ordering::Equal => ua.cmp(ub),
        o => o,
    }
}

/// The deletion order of two Pods of a ReplicaSet: Less deletes `a` first. `rank` is how many
/// active Pods of the same owner share a Pod's node (doubled up goes first).
pub fn compare(a: &Pod, b: &Pod, rank: &HashMap<String, usize>, now: Timestamp) -> Ordering {
    let (na, nb) = (node(a), node(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return nb.is_empty().cmp(&na.is_empty());
    }
    let (ra, rb) = (is_ready(a), is_ready(b));
    let rank_of = |n: &str| rank.get(n).copied().unwrap_or(0);
    let (ua, ub) = (a.uid().unwrap_or_default(), b.uid().unwrap_or_default());
    phase_ordinal(a)
        .cmp(&phase_ordinal(b))
        .then(ra.cmp(&rb))
        .then(deletion_cost(a).cmp(&deletion_cost(b)))
        .then(rank_of(nb).cmp(&rank_of(na)))
        .then_with(|| match ra && rb {
            true if ready_since(a) != ready_since(b) => {
                newer_first(ready_since(a), ready_since(b), &ua, &ub, now)
            }
            _ => Ordering::Equal,
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            match created(a) == created(b) {
                true => Ordering::Equal,
                false => newer_first(created(a), created(b), &ua, &ub, now),
            }
        })
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
        sorted.sort_by(|a, b| compare(a, b, &rank, now));
    }
    sorted.iter().take(n).map(|p| p.name_any()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::time::Duration;

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
}
