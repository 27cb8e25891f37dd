//! The status of a Deployment that `kubectl rollout status` reads: observedGeneration,
//! updated/ready/available replicas, and the Available and Progressing conditions.

use super::rollout::{scaled, status_of};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use kube::ResourceExt;

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    old: Option<&DeploymentStatus>,
) -> DeploymentCondition {
    let status = if ok { "True" } else { "False" };
    let prev = old.and_then(|s| s.conditions.as_ref()).and_then(|cs| {
        cs.iter().find(|c| {
            serde_json::to_value(c)
                .ok()
                .is_some_and(|v| v["type"] == type_)
        })
    });
    if let Some(p) = prev {
        let v = serde_json::to_value(p).unwrap_or_default();
        if v["status"] == status && v["reason"] == reason {
            return p.clone();
        }
    }
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    serde_json::from_value(serde_json::json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now, "lastUpdateTime": now,
    }))
    .expect("a well-formed DeploymentCondition")
}

pub fn status(d: &Deployment, new: &ReplicaSet, olds: &[ReplicaSet]) -> DeploymentStatus {
    let spec = d.spec.clone();
    let replicas = spec.replicas.unwrap_or(1);
    let mut all = vec![new];
    all.extend(olds.iter());
    let (total, ready, available) = all
        .iter()
        .map(|r| status_of(r))
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    let updated = status_of(new).0;
    let ru = spec
        .strategy
        .and_then(|s| s.rolling_update)
        .unwrap_or_default();
    let max_unavailable = scaled(ru.max_unavailable.as_ref(), replicas, 25, false);
    let name = new.name_any();
    let complete = updated == replicas && total == replicas && available == replicas;
    let old = d.status.as_ref();
    DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(total),
        updated_replicas: Some(updated),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        unavailable_replicas: Some((replicas - available).max(0)),
        conditions: Some(vec![
            if available >= replicas - max_unavailable {
                condition(
                    "Available",
                    true,
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.".into(),
                    old,
                )
            } else {
                condition(
                    "Available",
                    false,
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.".into(),
                    old,
                )
            },
            if complete {
                condition(
                    "Progressing",
                    true,
                    "NewReplicaSetAvailable",
                    format!("ReplicaSet \"{name}\" has successfully progressed."),
                    old,
                )
            } else {
                condition(
                    "Progressing",
                    true,
                    "ReplicaSetUpdated",
                    format!("ReplicaSet \"{name}\" is progressing."),
                    old,
                )
            },
        ]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deploy, rs};

    #[test]
    fn status_reports_what_rollout_status_reads() {
        let d = deploy(3);
        let st = status(&d, &rs("web-abc", 3, 3, 3), &[]);
        assert_eq!(st.observed_generation, Some(3));
        assert_eq!(
            (st.replicas, st.updated_replicas, st.available_replicas),
            (Some(3), Some(3), Some(3))
        );
        let conds = serde_json::to_value(st.conditions.unwrap()).unwrap();
        assert_eq!(conds[1]["reason"], "NewReplicaSetAvailable");
        let st = status(&d, &rs("web-abc", 3, 3, 0), &[]);
        assert_eq!(
            serde_json::to_value(st.conditions.unwrap()).unwrap()[0]["status"],
            "False"
        );
    }
}
