//! A change of spec.replicas while paused or in the middle of a rollout: upstream's
//! proportional scaling, which spreads the difference over the active ReplicaSets in
//! proportion to their sizes instead of rolling.

use super::revision::{desired_replicas, max_replicas};
use super::rollout::{max_surge, spec_replicas, status_of};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::ResourceExt;
use std::cmp::Reverse;

fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// Upstream's isScalingEvent: an active ReplicaSet was last scaled for another replica count.
pub fn is_scaling_event(d: &Deployment, new: Option<&ReplicaSet>, olds: &[ReplicaSet]) -> bool {
    olds.iter()
        .chain(new)
        .filter(|r| spec_replicas(r) > 0)
        .any(|r| desired_replicas(r).is_some_and(|n| n != replicas(d)))
}

fn created(rs: &ReplicaSet) -> Option<k8s_openapi::jiff::Timestamp> {
    rs.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Upstream's IsSaturated: the new ReplicaSet alone runs every replica, available.
fn saturated(d: &Deployment, new: Option<&ReplicaSet>) -> bool {
    new.is_some_and(|n| {
        spec_replicas(n) == replicas(d)
            && desired_replicas(n) == Some(replicas(d))
            && status_of(n).2 == replicas(d)
    })
}

/// The sizes to set, (name, replicas), for spec.replicas (upstream's scale): the one active
/// ReplicaSet (or the newest) takes all; a saturated new one leaves the old at zero; otherwise
/// the difference is shared in proportion, the leftover going to the largest.
pub fn proportional(
    d: &Deployment,
    new: Option<&ReplicaSet>,
    olds: &[ReplicaSet],
) -> Vec<(String, i32)> {
    let want = replicas(d);
    let mut all: Vec<&ReplicaSet> = olds.iter().chain(new).collect();
    let active: Vec<&ReplicaSet> = all
        .iter()
        .copied()
        .filter(|r| spec_replicas(r) > 0)
        .collect();
    if active.len() <= 1 {
        all.sort_by_key(|r| Reverse(created(r)));
        let target = active.first().copied().or(new).or(all.first().copied());
        return target
            .filter(|r| spec_replicas(r) != want)
            .map(|r| vec![(r.name_any(), want)])
            .unwrap_or_default();
    }
    if saturated(d, new) {
        return active
            .iter()
            .filter(|r| Some(**r) != new)
            .map(|r| (r.name_any(), 0))
            .collect();
    }
    if spec_replicas_is_recreate(d) {
        return Vec::new();
    }
    shares(d, active)
}

fn spec_replicas_is_recreate(d: &Deployment) -> bool {
    d.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate")
}

/// The proportional part: each active ReplicaSet's share of what is added or removed.
fn shares(d: &Deployment, mut active: Vec<&ReplicaSet>) -> Vec<(String, i32)> {
    let want = replicas(d);
    let allowed = if want > 0 { want + max_surge(d) } else { 0 };
    let total: i32 = active.iter().map(|r| spec_replicas(r)).sum();
    let to_add = allowed - total;
    // Larger first; of equal size, newer first when adding and older first when removing.
    if to_add > 0 {
        active.sort_by_key(|r| (Reverse(spec_replicas(r)), Reverse(created(r))));
    } else {
        active.sort_by_key(|r| (Reverse(spec_replicas(r)), created(r)));
    }
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = active
        .iter()
        .map(|r| {
            let p = proportion(d, r, to_add, added);
            added += p;
            (r.name_any(), spec_replicas(r) + p)
        })
        .collect();
    if let Some(first) = sizes.first_mut() {
        first.1 = (first.1 + to_add - added).max(0);
    }
    sizes
        .into_iter()
        .zip(active)
        .filter(|((_, n), r)| *n != spec_replicas(r))
        .map(|(s, _)| s)
        .collect()
}

/// Upstream's GetReplicaSetProportion: the ReplicaSet's fraction, never beyond what is left.
fn proportion(d: &Deployment, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
    let size = spec_replicas(rs);
    if size == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if replicas(d) == 0 {
        -size
    } else {
        let max_now = replicas(d) + max_surge(d);
        let before = match max_replicas(rs) {
            Some(m) if m > 0 => m,
            _ => d
                .status
                .as_ref()
                .map_or(0, |s| s.replicas.unwrap_or(0))
                .max(1),
        };
        (size as f64 * max_now as f64 / before as f64).round() as i32 - size
    };
    let left = to_add - added;
    if to_add > 0 {
        fraction.min(left)
    } else {
        fraction.max(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deploy, rs};
    use keelson_apimachinery::well_known::{DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION};

    fn sized(name: &str, n: i32, desired: i32, max: i32) -> ReplicaSet {
        let mut r = rs(name, n, n, n);
        r.metadata.annotations = Some(
            [
                (DESIRED_REPLICAS_ANNOTATION.to_string(), desired.to_string()),
                (MAX_REPLICAS_ANNOTATION.to_string(), max.to_string()),
            ]
            .into(),
        );
        r
    }

    #[test]
    fn one_active_replicaset_takes_every_replica() {
        let d = deploy(5);
        let olds = [sized("old", 3, 3, 4)];
        assert!(is_scaling_event(&d, None, &olds));
        assert_eq!(proportional(&d, None, &olds), vec![("old".to_string(), 5)]);
        assert!(!is_scaling_event(&deploy(3), None, &olds));
    }

    #[test]
    fn mid_rollout_the_difference_is_shared_in_proportion() {
        // 10 replicas (max 13) split 6 old / 4 new, scaled to 20 (max 25): each grows by
        // its share of 25/13, the rounding leftover to the largest.
        let d = deploy(20);
        let new = sized("new", 4, 10, 13);
        let olds = [sized("old", 6, 10, 13)];
        let mut out = proportional(&d, Some(&new), &olds);
        out.sort();
        let total: i32 = out.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 25, "{out:?}");
        assert_eq!(out, vec![("new".to_string(), 8), ("old".to_string(), 17)]);
    }

    #[test]
    fn scaling_to_zero_empties_every_replicaset() {
        let d = deploy(0);
        let new = sized("new", 2, 4, 5);
        let olds = [sized("old", 3, 4, 5)];
        let mut out = proportional(&d, Some(&new), &olds);
        out.sort();
        assert_eq!(out, vec![("new".to_string(), 0), ("old".to_string(), 0)]);
    }
}
