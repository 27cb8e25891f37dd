//! How far one step of a rolling update goes: the replicas each ReplicaSet of a Deployment should
//! have next, within maxSurge and maxUnavailable (or all-at-once for Recreate).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

/// An absolute number or a percentage of `total`, as maxSurge (round up) and
/// maxUnavailable (round down) are read.
pub fn scaled(v: Option<&IntOrString>, total: i32, default_pct: i32, round_up: bool) -> i32 {
    let pct = |p: i32| {
        let x = total as i64 * p as i64;
        (if round_up { (x + 99) / 100 } else { x / 100 }) as i32
    };
    match v {
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => s.trim_end_matches('%').parse().map(pct).unwrap_or(0),
        None => pct(default_pct),
    }
}

pub(super) fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(0)
}

pub(super) fn status_of(rs: &ReplicaSet) -> (i32, i32, i32) {
    rs.status
        .as_ref()
        .map(|s| {
            (
                s.replicas,
                s.ready_replicas.unwrap_or(0),
                s.available_replicas.unwrap_or(0),
            )
        })
        .unwrap_or_default()
}

/// maxSurge and maxUnavailable resolved against spec.replicas, as upstream's
/// ResolveFenceposts: both zero makes unavailable one.
fn fenceposts(d: &Deployment) -> (i32, i32) {
    let replicas = d.spec.replicas.unwrap_or(1).max(0);
    let ru = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let surge = scaled(ru.max_surge.as_ref(), replicas, 25, true);
    let unavailable = scaled(ru.max_unavailable.as_ref(), replicas, 25, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn is_rolling(d: &Deployment) -> bool {
    d.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) != Some("Recreate")
}

/// Upstream's MaxSurge: none for Recreate.
pub fn max_surge(d: &Deployment) -> i32 {
    if is_rolling(d) {
        fenceposts(d).0
    } else {
        0
    }
}

/// Upstream's MaxUnavailable: none for Recreate or zero replicas, never above replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = d.spec.replicas.unwrap_or(1).max(0);
    if !is_rolling(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

/// The replicas each ReplicaSet should have next: (new, [(old name, replicas)]).
pub fn rollout(d: &Deployment, new: &ReplicaSet, olds: &[ReplicaSet]) -> (i32, Vec<(String, i32)>) {
    let spec = d.spec.clone();
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let strategy = spec.strategy.unwrap_or_default();
    let old_total: i32 = olds.iter().map(spec_replicas).sum();
    if strategy.type_.as_deref() == Some("Recreate") {
        let old_pods: i32 = olds.iter().map(|o| status_of(o).0).sum();
        let new_target = if old_total == 0 && old_pods == 0 {
            replicas
        } else {
            0
        };
        return (new_target, olds.iter().map(|o| (o.name_any(), 0)).collect());
    }
    let (surge, unavailable) = fenceposts(d);
    let cur_new = spec_replicas(new);
    let new_target = if cur_new > replicas {
        replicas
    } else {
        let room = (replicas + surge - (cur_new + old_total)).max(0);
        (cur_new + room).min(replicas)
    };
    let all_pods: i32 = status_of(new).0 + olds.iter().map(|o| status_of(o).0).sum::<i32>();
    let new_unavailable = (cur_new - status_of(new).2).max(0);
    let mut can_remove = all_pods - (replicas - unavailable) - new_unavailable;
    let mut olds_sorted: Vec<&ReplicaSet> = olds.iter().collect();
    olds_sorted.sort_by_key(|o| o.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let mut out = Vec::new();
    for o in olds_sorted {
        let cur = spec_replicas(o);
        // Unavailable old Pods can always go; they serve nothing.
        let unhealthy = (cur - status_of(o).2).max(0);
        let down = (can_remove.max(0).min(cur)).max(unhealthy.min(cur));
        can_remove -= down;
        out.push((o.name_any(), cur - down));
    }
    (new_target, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deploy, rs};

    #[test]
    fn percentages_round_like_upstream() {
        let p = IntOrString::String("25%".into());
        assert_eq!(scaled(Some(&p), 3, 0, true), 1);
        assert_eq!(scaled(Some(&p), 3, 0, false), 0);
        assert_eq!(scaled(None, 10, 25, true), 3);
        assert_eq!(scaled(Some(&IntOrString::Int(2)), 10, 25, true), 2);
    }

    #[test]
    fn first_rollout_scales_new_to_replicas() {
        let (n, olds) = rollout(&deploy(3), &rs("new", 0, 0, 0), &[]);
        assert_eq!((n, olds.len()), (3, 0));
    }

    #[test]
    fn rolling_update_surges_then_retires_old_as_new_becomes_available() {
        // 4 replicas: surge 1, unavailable 1.
        let d = deploy(4);
        let (n, olds) = rollout(&d, &rs("new", 0, 0, 0), &[rs("old", 4, 4, 4)]);
        assert_eq!(n, 1);
        assert_eq!(olds, vec![("old".to_string(), 3)]);
        // New pods available: old goes to zero once the new ones cover the minimum.
        let (n, olds) = rollout(&d, &rs("new", 4, 4, 4), &[rs("old", 1, 1, 1)]);
        assert_eq!((n, olds), (4, vec![("old".to_string(), 0)]));
    }
}
