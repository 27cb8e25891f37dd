//! The Deployment controller: one ReplicaSet per pod template (named by the template's hash),
//! rolled from old to new within maxSurge/maxUnavailable, and a status that `kubectl rollout
//! status` reads (observedGeneration, updated/ready/available replicas, conditions).

use crate::api::{list_selected, patch_status};
use crate::hash::fnv1a;
use crate::pods::{controller_of, is_controlled_by, owner_ref};
use crate::{Ctx, Error};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";

/// FNV-1a of the template's JSON, written in the alphabet upstream uses for names.
pub fn template_hash(template: &serde_json::Value) -> String {
    let h = fnv1a(&serde_json::to_vec(template).unwrap_or_default());
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    let mut n = h as u64;
    while n > 0 || out.is_empty() {
        out.push(ALPHABET[(n % ALPHABET.len() as u64) as usize] as char);
        n /= ALPHABET.len() as u64;
    }
    out
}

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

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(0)
}

fn status_of(rs: &ReplicaSet) -> (i32, i32, i32) {
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
    let ru = strategy.rolling_update.unwrap_or_default();
    let surge = scaled(ru.max_surge.as_ref(), replicas, 25, true);
    let mut unavailable = scaled(ru.max_unavailable.as_ref(), replicas, 25, false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
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

fn new_replicaset(d: &Deployment, hash: &str, revision: u64) -> Result<ReplicaSet, Error> {
    let spec = &d.spec;
    let mut template = spec.template.clone();
    let mut meta = template.metadata.take().unwrap_or_default();
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(HASH_LABEL.into(), hash.into());
    let labels = meta.labels.clone();
    template.metadata = Some(meta);
    let mut sel = spec.selector.clone();
    sel.match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(HASH_LABEL.into(), hash.into());
    let rs = serde_json::json!({
        "metadata": {
            "name": format!("{}-{hash}", d.name_any()),
            "namespace": d.namespace(),
            "labels": labels,
            "annotations": { REVISION: revision.to_string() },
            "ownerReferences": [owner_ref("apps/v1", "Deployment", &d.name_any(), &d.uid().unwrap_or_default())],
        },
        "spec": { "replicas": 0, "selector": sel, "template": template, "minReadySeconds": spec.min_ready_seconds },
    });
    serde_json::from_value(rs).map_err(|e| Error::Invalid(e.to_string()))
}

fn revision(rs: &ReplicaSet) -> u64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSets this Deployment owns (or may adopt): the one of the current template, made
/// when missing, and the old ones.
async fn replicasets(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
) -> Result<(ReplicaSet, Vec<ReplicaSet>), Error> {
    let uid = d.uid().unwrap_or_default();
    let owned = rsapi
        .list(&list_selected(&d.spec.selector)?)
        .await?
        .items
        .into_iter()
        .filter(|r| is_controlled_by(r, &uid) || controller_of(r).is_none());
    let hash = template_hash(&serde_json::to_value(&d.spec.template).unwrap_or_default());
    let (mut news, olds): (Vec<ReplicaSet>, Vec<ReplicaSet>) =
        owned.partition(|r| r.labels().get(HASH_LABEL) == Some(&hash));
    if let Some(n) = news.pop() {
        return Ok((n, olds));
    }
    let rev = olds.iter().map(revision).max().unwrap_or(0) + 1;
    let rs = new_replicaset(d, &hash, rev)?;
    let new = match rsapi.create(&PostParams::default(), &rs).await {
        Ok(r) => r,
        Err(kube::Error::Api(e)) if e.is_already_exists() => rsapi.get(&rs.name_any()).await?,
        Err(e) => return Err(e.into()),
    };
    Ok((new, olds))
}

/// Sets each ReplicaSet's spec.replicas to the next step of the rollout.
async fn scale(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    new: &ReplicaSet,
    olds: &[ReplicaSet],
) -> Result<(), kube::Error> {
    let (new_target, old_targets) = rollout(d, new, olds);
    let scale = |name: String, n: i32| {
        let p = serde_json::json!({ "spec": { "replicas": n } });
        async move {
            rsapi
                .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                .await
        }
    };
    if new_target != spec_replicas(new) {
        tracing::info!(deployment = %d.name_any(), replicaset = %new.name_any(), replicas = new_target, "scaling new ReplicaSet");
        scale(new.name_any(), new_target).await?;
    }
    for (name, n) in old_targets {
        if olds
            .iter()
            .any(|o| o.name_any() == name && spec_replicas(o) != n)
        {
            tracing::info!(deployment = %d.name_any(), replicaset = %name, replicas = n, "scaling old ReplicaSet");
            scale(name, n).await?;
        }
    }
    Ok(())
}

/// Writes the revision annotation and the status `kubectl rollout status` reads, when changed.
async fn report(
    d: &Deployment,
    dapi: &Api<Deployment>,
    new: &ReplicaSet,
    olds: &[ReplicaSet],
) -> Result<(), kube::Error> {
    let st = status(d, new, olds);
    if d.status.as_ref() == Some(&st) {
        return Ok(());
    }
    let rev = revision(new).to_string();
    if d.annotations().get(REVISION) != Some(&rev) {
        let p = serde_json::json!({"metadata": {"annotations": {REVISION: rev}}});
        dapi.patch(&d.name_any(), &PatchParams::default(), &Patch::Merge(p))
            .await?;
    }
    let mut patch = serde_json::json!({ "status": st });
    patch["status"]["observedGeneration"] = serde_json::json!(d.metadata.generation);
    patch_status(dapi, &d.name_any(), &patch).await
}

pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = d.namespace().unwrap_or_default();
    let rsapi: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let (new, olds) = replicasets(&d, &rsapi).await?;
    scale(&d, &rsapi, &new, &olds).await?;
    report(&d, &Api::namespaced(ctx.client.clone(), &ns), &new, &olds).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web", "namespace": "default", "generation": 3, "uid": "d1" },
            "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web" } },
                "template": { "metadata": { "labels": { "app": "web" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        }))
        .unwrap()
    }

    fn rs(name: &str, spec: i32, pods: i32, available: i32) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": { "replicas": spec, "selector": {} },
            "status": { "replicas": pods, "readyReplicas": available, "availableReplicas": available },
        }))
        .unwrap()
    }

    #[test]
    fn hash_is_stable_and_follows_the_template() {
        let a = serde_json::json!({"spec": {"containers": [{"image": "a"}]}});
        let b = serde_json::json!({"spec": {"containers": [{"image": "b"}]}});
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert!(template_hash(&a)
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

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
