//! Revisions, as `kubectl rollout history` and `rollout undo` read them from the ReplicaSets:
//! each ReplicaSet's deployment.kubernetes.io/revision, a number no two ReplicaSets share. A
//! ReplicaSet made current again (a rollback) moves to the next number and keeps its earlier
//! ones in revision-history, as upstream's SetNewReplicaSetAnnotations does.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use keelson_apimachinery::well_known::{
    DEPLOYMENT_REVISION_ANNOTATION as REVISION,
    DEPLOYMENT_REVISION_HISTORY_ANNOTATION as REVISION_HISTORY, DEPRECATED_ROLLBACK_TO_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION as DESIRED, LAST_APPLIED_CONFIG_ANNOTATION,
    MAX_REPLICAS_ANNOTATION as MAX,
};
use kube::ResourceExt;
use std::collections::BTreeMap;

/// Upstream's limit on the length of revision-history: older numbers drop out first.
const MAX_HISTORY_CHARS: usize = 2000;

/// What the controller keeps itself: never copied from the Deployment to a ReplicaSet.
const NOT_COPIED: [&str; 6] = [
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION,
    REVISION_HISTORY,
    DESIRED,
    MAX,
    DEPRECATED_ROLLBACK_TO_ANNOTATION,
];

pub fn revision(rs: &ReplicaSet) -> u64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The revision the current template's ReplicaSet should have: one above every other one.
pub fn next_revision(olds: &[ReplicaSet]) -> u64 {
    olds.iter().map(revision).max().unwrap_or(0) + 1
}

/// The annotations the current template's ReplicaSet should carry, from `current` (its own):
/// the Deployment's (but the controller's own), the revision raised to `next` if it is lower
/// (the earlier number then kept in revision-history), and, for a ReplicaSet about to be
/// made, the replicas annotations. None when nothing changes.
pub fn new_rs_annotations(
    d: &Deployment,
    current: &BTreeMap<String, String>,
    next: u64,
    exists: bool,
    max_replicas: i32,
) -> Option<BTreeMap<String, String>> {
    let mut out = current.clone();
    for (k, v) in d.annotations() {
        if !NOT_COPIED.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    let old = current.get(REVISION);
    let old_number = match old {
        Some(o) => match o.parse::<u64>() {
            Ok(n) => n,
            // Upstream leaves a ReplicaSet with an unreadable revision alone.
            Err(_) => return None,
        },
        None => 0,
    };
    if old_number < next {
        out.insert(REVISION.into(), next.to_string());
        if let Some(o) = old {
            append_history(&mut out, o);
        }
    }
    if !exists {
        let desired = d.spec.replicas.unwrap_or(1);
        out.insert(DESIRED.into(), desired.to_string());
        out.insert(MAX.into(), max_replicas.to_string());
    }
    (out != *current).then_some(out)
}

/// Adds `old` to revision-history, dropping the oldest numbers to stay within the limit.
fn append_history(annotations: &mut BTreeMap<String, String>, old: &str) {
    let history = annotations
        .get(REVISION_HISTORY)
        .cloned()
        .unwrap_or_default();
    if history.is_empty() {
        annotations.insert(REVISION_HISTORY.into(), old.into());
        return;
    }
    let mut kept: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    while total > MAX_HISTORY_CHARS && !kept.is_empty() {
        total -= kept.remove(0).len() + 1;
    }
    if total <= MAX_HISTORY_CHARS {
        kept.push(old);
        annotations.insert(REVISION_HISTORY.into(), kept.join(","));
    }
}

/// The replicas annotations a ReplicaSet gets when scaled, if they differ from its own.
pub fn replicas_annotations(rs: &ReplicaSet, desired: i32, max: i32) -> Option<serde_json::Value> {
    let a = rs.annotations();
    let same = a.get(DESIRED) == Some(&desired.to_string()) && a.get(MAX) == Some(&max.to_string());
    (!same).then(|| serde_json::json!({ DESIRED: desired.to_string(), MAX: max.to_string() }))
}

/// The Deployment's replicas when `rs` was last scaled, from its annotation.
pub fn desired_replicas(rs: &ReplicaSet) -> Option<i32> {
    rs.annotations().get(DESIRED).and_then(|v| v.parse().ok())
}

/// The Deployment's replicas plus maxSurge when `rs` was last scaled, from its annotation.
pub fn max_replicas(rs: &ReplicaSet) -> Option<i32> {
    rs.annotations().get(MAX).and_then(|v| v.parse().ok())
}

/// The old ReplicaSets to delete beyond revisionHistoryLimit: the lowest revisions first, and
/// only those scaled to zero with no Pod left (upstream's cleanupDeployment).
pub fn beyond_history_limit(d: &Deployment, olds: &[ReplicaSet]) -> Vec<String> {
    let limit = match d.spec.revision_history_limit {
        Some(l) if l != i32::MAX => l.max(0) as usize,
        _ => return Vec::new(),
    };
    let mut alive: Vec<&ReplicaSet> = olds
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .collect();
    if alive.len() <= limit {
        return Vec::new();
    }
    alive.sort_by_key(|r| {
        (
            revision(r),
            r.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    let diff = alive.len() - limit;
    alive[..diff]
        .iter()
        .filter(|r| {
            let st = r.status.as_ref();
            let observed = st.and_then(|s| s.observed_generation).unwrap_or(0);
            st.map_or(0, |s| s.replicas) == 0
                && r.spec.replicas.unwrap_or(1) == 0
                && r.metadata.generation.unwrap_or(0) <= observed
        })
        .map(|r| r.name_any())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deploy, rs};

    fn annotated(name: &str, rev: &str) -> ReplicaSet {
        let mut r = rs(name, 0, 0, 0);
        r.metadata.annotations = Some([(REVISION.to_string(), rev.to_string())].into());
        r
    }

    #[test]
    fn next_revision_is_one_above_the_highest() {
        assert_eq!(next_revision(&[]), 1);
        assert_eq!(
            next_revision(&[annotated("a", "3"), annotated("b", "1")]),
            4
        );
    }

    #[test]
    fn a_reused_replicaset_moves_to_the_next_number_and_keeps_its_old_ones() {
        let mut d = deploy(3);
        d.metadata.annotations = Some(
            [
                ("kubernetes.io/change-cause".to_string(), "undo".to_string()),
                (REVISION.to_string(), "3".to_string()),
                (LAST_APPLIED_CONFIG_ANNOTATION.to_string(), "{}".to_string()),
            ]
            .into(),
        );
        let current: BTreeMap<String, String> = [
            (REVISION.to_string(), "1".to_string()),
            (REVISION_HISTORY.to_string(), "0".to_string()),
        ]
        .into();
        let out = new_rs_annotations(&d, &current, 4, true, 4).unwrap();
        assert_eq!(out[REVISION], "4");
        assert_eq!(out[REVISION_HISTORY], "0,1");
        assert_eq!(out["kubernetes.io/change-cause"], "undo");
        assert!(!out.contains_key(LAST_APPLIED_CONFIG_ANNOTATION));
        assert!(
            !out.contains_key(DESIRED),
            "only a new ReplicaSet gets them here"
        );
        // Already current: nothing to write.
        assert_eq!(new_rs_annotations(&d, &out, 4, true, 4), None);
    }

    #[test]
    fn a_new_replicaset_gets_its_revision_and_the_replicas_annotations() {
        let out = new_rs_annotations(&deploy(3), &BTreeMap::new(), 1, false, 4).unwrap();
        assert_eq!(out[REVISION], "1");
        assert_eq!((out[DESIRED].as_str(), out[MAX].as_str()), ("3", "4"));
        assert!(!out.contains_key(REVISION_HISTORY));
    }

    #[test]
    fn history_drops_the_oldest_numbers_beyond_its_length_limit() {
        let long: Vec<String> = (0..600).map(|i| i.to_string()).collect();
        let mut a: BTreeMap<String, String> =
            [(REVISION_HISTORY.to_string(), long.join(","))].into();
        append_history(&mut a, "600");
        let h = &a[REVISION_HISTORY];
        assert!(
            h.len() <= MAX_HISTORY_CHARS && h.ends_with(",599,600"),
            "{h}"
        );
        assert!(!h.starts_with("0,"));
    }

    #[test]
    fn history_limit_deletes_the_lowest_empty_revisions_only() {
        let mut d = deploy(3);
        d.spec.revision_history_limit = Some(1);
        let mut busy = annotated("busy", "1");
        busy.spec.replicas = Some(1);
        let olds = [annotated("r3", "3"), busy, annotated("r2", "2")];
        // Two must go: the lowest are "busy" (still scaled) and "r2".
        assert_eq!(beyond_history_limit(&d, &olds), vec!["r2".to_string()]);
        d.spec.revision_history_limit = Some(5);
        assert!(beyond_history_limit(&d, &olds).is_empty());
    }
}
