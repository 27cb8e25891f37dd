//! The Deployment controller: one ReplicaSet per pod template (named by the template's hash),
//! rolled from old to new within maxSurge/maxUnavailable (`rollout`), scaled in proportion when
//! paused or resized mid-rollout (`scale`), numbered for `kubectl rollout history`/`undo`
//! (`revision`), and a status that `kubectl rollout status` reads (`status`).

mod revision;
mod rollout;
mod scale;
mod status;

pub use revision::{beyond_history_limit, new_rs_annotations, next_revision};
pub use rollout::{rollout, scaled};
pub use scale::proportional;
pub use status::{paused_conditions, rollout_status, status};

use crate::api::{delete_if_present, list_selected, patch_status};
use crate::pods::{controller_of, is_controlled_by, owner_ref};
use crate::{Ctx, Error};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::hash::fnv1a_32;
use keelson_apimachinery::well_known::{
    DEPLOYMENT_REVISION_ANNOTATION as REVISION, POD_TEMPLATE_HASH_LABEL as HASH_LABEL,
};
use keelson_daemon::events::{EventType, Recorder};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use revision::{replicas_annotations, revision};
use rollout::{max_surge, spec_replicas};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "deployment-controller";

/// FNV-1a of the template's JSON, written in the alphabet upstream uses for names.
pub fn template_hash(template: &serde_json::Value) -> String {
    let h = fnv1a_32(&serde_json::to_vec(template).unwrap_or_default());
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    let mut n = h as u64;
    while n > 0 || out.is_empty() {
        out.push(ALPHABET[(n % ALPHABET.len() as u64) as usize] as char);
        n /= ALPHABET.len() as u64;
    }
    out
}

/// The pod template as JSON without the pod-template-hash label, as upstream's
/// EqualIgnoreHash compares them (`kubectl rollout undo` writes an old ReplicaSet's template
/// back without it).
fn template_without_hash(
    t: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>,
) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap_or_default();
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(|l| l.as_object_mut())
    {
        labels.remove(HASH_LABEL);
        if labels.is_empty() {
            v["metadata"].as_object_mut().map(|m| m.remove("labels"));
        }
    }
    v
}

fn new_replicaset(
    d: &Deployment,
    hash: &str,
    annotations: BTreeMap<String, String>,
) -> Result<ReplicaSet, Error> {
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
            "annotations": annotations,
            "ownerReferences": [owner_ref("apps/v1", "Deployment", &d.name_any(), &d.uid().unwrap_or_default())],
        },
        "spec": { "replicas": 0, "selector": sel, "template": template, "minReadySeconds": spec.min_ready_seconds },
    });
    serde_json::from_value(rs).map_err(|e| Error::Invalid(e.to_string()))
}

/// The ReplicaSets this Deployment owns (or may adopt), split into the one of the current
/// template, if there is one (the oldest such, as upstream's FindNewReplicaSet), and the rest.
async fn replicasets(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), Error> {
    let uid = d.uid().unwrap_or_default();
    let mut owned: Vec<ReplicaSet> = rsapi
        .list(&list_selected(&d.spec.selector)?)
        .await?
        .items
        .into_iter()
        .filter(|r| is_controlled_by(r, &uid) || controller_of(r).is_none())
        .collect();
    owned.sort_by_key(|r| r.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let hash = template_hash(&serde_json::to_value(&d.spec.template).unwrap_or_default());
    let want = template_without_hash(Some(&d.spec.template));
    let is_new = |r: &ReplicaSet| {
        template_without_hash(r.spec.template.as_ref()) == want
            || r.labels().get(HASH_LABEL) == Some(&hash)
    };
    let new = owned.iter().position(is_new).map(|i| owned.remove(i));
    Ok((new, owned))
}

/// Makes the ReplicaSet of the current template, numbered after every old one.
async fn create_new(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    olds: &[ReplicaSet],
) -> Result<ReplicaSet, Error> {
    let hash = template_hash(&serde_json::to_value(&d.spec.template).unwrap_or_default());
    let max = d.spec.replicas.unwrap_or(1) + max_surge(d);
    let annotations = new_rs_annotations(d, &BTreeMap::new(), next_revision(olds), false, max)
        .unwrap_or_default();
    let rs = new_replicaset(d, &hash, annotations)?;
    match rsapi.create(&PostParams::default(), &rs).await {
        Ok(r) => Ok(r),
        Err(kube::Error::Api(e)) if e.is_already_exists() => Ok(rsapi.get(&rs.name_any()).await?),
        Err(e) => {
            let message = format!("Failed to create new replica set {:?}: {e}", rs.name_any());
            events.publish(d, EventType::Warning, "ReplicaSetCreateError", message);
            Err(e.into())
        }
    }
}

/// Brings the current template's ReplicaSet's annotations (revision above every old one, the
/// Deployment's own) and minReadySeconds up to date.
async fn sync_new(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    new: ReplicaSet,
    olds: &[ReplicaSet],
) -> Result<ReplicaSet, kube::Error> {
    let annotations = new_rs_annotations(d, new.annotations(), next_revision(olds), true, 0);
    let min_ready = d.spec.min_ready_seconds;
    if annotations.is_none() && new.spec.min_ready_seconds == min_ready {
        return Ok(new);
    }
    let mut p = serde_json::json!({ "spec": { "minReadySeconds": min_ready } });
    if let Some(a) = annotations {
        p["metadata"] = serde_json::json!({ "annotations": a });
    }
    rsapi
        .patch(&new.name_any(), &PatchParams::default(), &Patch::Merge(&p))
        .await
}

/// Sets one ReplicaSet's replicas (and the replicas annotations upstream keeps on it for
/// proportional scaling), with upstream's ScalingReplicaSet Event.
async fn scale_one(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    rs: &ReplicaSet,
    to: i32,
) -> Result<(), kube::Error> {
    let desired = d.spec.replicas.unwrap_or(1);
    let annotations = replicas_annotations(rs, desired, desired + max_surge(d));
    let from = spec_replicas(rs);
    if from == to && annotations.is_none() {
        return Ok(());
    }
    let mut p = serde_json::json!({ "spec": { "replicas": to } });
    if let Some(a) = annotations {
        p["metadata"] = serde_json::json!({ "annotations": a });
    }
    tracing::info!(deployment = %d.name_any(), replicaset = %rs.name_any(), replicas = to, "scaling ReplicaSet");
    rsapi
        .patch(&rs.name_any(), &PatchParams::default(), &Patch::Merge(&p))
        .await?;
    if from != to {
        let message = scaling_message(&rs.name_any(), from, to);
        events.publish(d, EventType::Normal, "ScalingReplicaSet", message);
    }
    Ok(())
}

/// Sets each ReplicaSet's spec.replicas to the next step of the rollout. True when one changed.
async fn roll(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    new: &ReplicaSet,
    olds: &[ReplicaSet],
) -> Result<bool, kube::Error> {
    let (new_target, old_targets) = rollout(d, new, olds);
    let mut changed = false;
    if new_target != spec_replicas(new) {
        scale_one(d, rsapi, events, new, new_target).await?;
        changed = true;
    }
    for (name, n) in old_targets {
        if let Some(old) = olds
            .iter()
            .find(|o| o.name_any() == name && spec_replicas(o) != n)
        {
            scale_one(d, rsapi, events, old, n).await?;
            changed = true;
        }
    }
    Ok(changed)
}

/// Upstream's ScalingReplicaSet message.
pub fn scaling_message(replicaset: &str, from: i32, to: i32) -> String {
    let direction = if to > from { "up" } else { "down" };
    format!("Scaled {direction} replica set {replicaset} from {from} to {to}")
}

/// Deletes the old ReplicaSets beyond revisionHistoryLimit.
async fn cleanup(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    olds: &[ReplicaSet],
) -> Result<(), kube::Error> {
    for name in beyond_history_limit(d, olds) {
        tracing::info!(deployment = %d.name_any(), replicaset = %name, "deleting an old ReplicaSet beyond revisionHistoryLimit");
        delete_if_present(rsapi, &name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// Writes the Deployment's revision (its new ReplicaSet's) and `st` when they changed.
async fn report(
    d: &Deployment,
    dapi: &Api<Deployment>,
    new: Option<&ReplicaSet>,
    stored: Option<&DeploymentStatus>,
    st: DeploymentStatus,
) -> Result<(), kube::Error> {
    if let Some(rev) = new.map(|n| revision(n).to_string()) {
        if d.annotations().get(REVISION) != Some(&rev) {
            let p = serde_json::json!({"metadata": {"annotations": {REVISION: rev}}});
            dapi.patch(&d.name_any(), &PatchParams::default(), &Patch::Merge(p))
                .await?;
        }
    }
    if stored == Some(&st) {
        return Ok(());
    }
    patch_status(dapi, &d.name_any(), &serde_json::json!({ "status": st })).await
}

/// Paused, or spec.replicas changed mid-rollout: no new ReplicaSet, sizes shared in proportion
/// (upstream's sync); while paused, old ReplicaSets beyond the history limit go.
async fn sync_only(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    new: Option<ReplicaSet>,
    olds: &[ReplicaSet],
) -> Result<(Option<ReplicaSet>, DeploymentStatus), Error> {
    let new = match new {
        Some(n) => Some(sync_new(d, rsapi, n, olds).await?),
        None => None,
    };
    for (name, n) in proportional(d, new.as_ref(), olds) {
        if let Some(rs) = olds
            .iter()
            .chain(new.as_ref())
            .find(|r| r.name_any() == name)
        {
            scale_one(d, rsapi, events, rs, n).await?;
        }
    }
    if d.spec.paused == Some(true) {
        cleanup(d, rsapi, olds).await?;
    }
    Ok((new.clone(), status(d, new.as_ref(), olds)))
}

/// A rollout step (upstream's rolloutRolling/rolloutRecreate): the new ReplicaSet found or
/// made, sizes moved toward it, history pruned once complete, and the Progressing condition.
async fn roll_out(
    d: &mut Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    new: Option<ReplicaSet>,
    olds: &[ReplicaSet],
) -> Result<(ReplicaSet, DeploymentStatus), Error> {
    let with_deadline = status::progress_deadline(d).is_some();
    let new = match new {
        Some(n) => {
            let n = sync_new(d, rsapi, n, olds).await?;
            let st = d.status.get_or_insert_with(Default::default);
            if with_deadline && status::get(st, status::PROGRESSING).is_none() {
                let msg = format!("Found new replica set {:?}", n.name_any());
                status::set(
                    st,
                    status::condition(status::PROGRESSING, "True", status::FOUND_NEW_RS, msg),
                );
            }
            n
        }
        None => {
            let n = create_new(d, rsapi, events, olds).await?;
            if with_deadline {
                let msg = format!("Created new replica set {:?}", n.name_any());
                let c = status::condition(status::PROGRESSING, "True", status::NEW_RS_CREATED, msg);
                status::set(d.status.get_or_insert_with(Default::default), c);
            }
            n
        }
    };
    let scaled = roll(d, rsapi, events, &new, olds).await?;
    if !scaled && d.status.as_ref().is_some_and(|s| status::complete(d, s)) {
        cleanup(d, rsapi, olds).await?;
    }
    let st = rollout_status(d, Some(&new), olds, Timestamp::now());
    Ok((new, st))
}

pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let mut d = (*d).clone();
    let ns = d.namespace().unwrap_or_default();
    let rsapi: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let dapi: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let events = ctx.events.reporting(COMPONENT);
    let (new, olds) = replicasets(&d, &rsapi).await?;
    if let Some(st) = paused_conditions(&d) {
        patch_status(&dapi, &d.name_any(), &serde_json::json!({ "status": st })).await?;
        d.status = Some(st);
    }
    // As written: roll_out notes the new ReplicaSet's condition in `d` before the one write.
    let stored = d.status.clone();
    let paused = d.spec.paused == Some(true);
    let (new, st) = if paused || scale::is_scaling_event(&d, new.as_ref(), &olds) {
        sync_only(&d, &rsapi, &events, new, &olds).await?
    } else {
        let (n, st) = roll_out(&mut d, &rsapi, &events, new, &olds).await?;
        (Some(n), st)
    };
    let recheck = status::recheck_after(&d, &st, Timestamp::now());
    report(&d, &dapi, new.as_ref(), stored.as_ref(), st).await?;
    Ok(Action::requeue(recheck.unwrap_or(Duration::from_secs(300))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixtures the rollout and status tests share.
    pub(super) fn deploy(replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web", "namespace": "default", "generation": 3, "uid": "d1" },
            "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web" } },
                "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                "template": { "metadata": { "labels": { "app": "web" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        }))
        .unwrap()
    }

    pub(super) fn rs(name: &str, spec: i32, pods: i32, available: i32) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "spec": { "replicas": spec, "selector": {} },
            "status": { "replicas": pods, "readyReplicas": available, "availableReplicas": available },
        }))
        .unwrap()
    }

    #[test]
    fn scaling_messages_read_as_upstream() {
        assert_eq!(
            scaling_message("web-6d4cf56db6", 0, 3),
            "Scaled up replica set web-6d4cf56db6 from 0 to 3"
        );
        assert_eq!(
            scaling_message("web-6d4cf56db6", 3, 1),
            "Scaled down replica set web-6d4cf56db6 from 3 to 1"
        );
    }

    #[test]
    fn a_replicaset_matches_its_template_without_the_hash_label() {
        // What `kubectl rollout undo` writes back: the ReplicaSet's template minus the label.
        let d = deploy(3);
        let made = new_replicaset(&d, "abc", BTreeMap::new()).unwrap();
        let labels = made
            .spec
            .template
            .as_ref()
            .unwrap()
            .metadata
            .as_ref()
            .unwrap();
        assert_eq!(labels.labels.as_ref().unwrap()[HASH_LABEL], "abc");
        let want = template_without_hash(Some(&d.spec.template));
        assert_eq!(template_without_hash(made.spec.template.as_ref()), want);
        let mut other = d.clone();
        other.spec.template.spec.as_mut().unwrap().containers[0].image = Some("j".into());
        assert_ne!(template_without_hash(Some(&other.spec.template)), want);
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
}
