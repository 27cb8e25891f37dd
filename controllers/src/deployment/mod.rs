//! The Deployment controller: one ReplicaSet per pod template (named by the template's hash),
//! rolled from old to new within maxSurge/maxUnavailable (`rollout`), and a status that `kubectl
//! rollout status` reads (`status`).

mod rollout;
mod status;

pub use rollout::{rollout, scaled};
pub use status::status;

use crate::api::{list_selected, patch_status};
use crate::hash::fnv1a;
use crate::pods::{controller_of, is_controlled_by, owner_ref};
use crate::{Ctx, Error};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use keelson_apimachinery::well_known::{
    DEPLOYMENT_REVISION_ANNOTATION as REVISION, POD_TEMPLATE_HASH_LABEL as HASH_LABEL,
};
use keelson_daemon::events::{EventType, Recorder};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use rollout::spec_replicas;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "deployment-controller";

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
    events: &Recorder,
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
        Err(e) => {
            let message = format!("Failed to create new replica set {:?}: {e}", rs.name_any());
            events.publish(d, EventType::Warning, "ReplicaSetCreateError", message);
            return Err(e.into());
        }
    };
    Ok((new, olds))
}

/// Sets each ReplicaSet's spec.replicas to the next step of the rollout, with upstream's
/// ScalingReplicaSet Event on the Deployment for each.
async fn scale(
    d: &Deployment,
    rsapi: &Api<ReplicaSet>,
    events: &Recorder,
    new: &ReplicaSet,
    olds: &[ReplicaSet],
) -> Result<(), kube::Error> {
    let (new_target, old_targets) = rollout(d, new, olds);
    let scale = |name: String, from: i32, to: i32| {
        let p = serde_json::json!({ "spec": { "replicas": to } });
        async move {
            tracing::info!(deployment = %d.name_any(), replicaset = %name, replicas = to, "scaling ReplicaSet");
            rsapi
                .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                .await?;
            events.publish(
                d,
                EventType::Normal,
                "ScalingReplicaSet",
                scaling_message(&name, from, to),
            );
            Ok::<(), kube::Error>(())
        }
    };
    if new_target != spec_replicas(new) {
        scale(new.name_any(), spec_replicas(new), new_target).await?;
    }
    for (name, n) in old_targets {
        if let Some(old) = olds
            .iter()
            .find(|o| o.name_any() == name && spec_replicas(o) != n)
        {
            scale(name, spec_replicas(old), n).await?;
        }
    }
    Ok(())
}

/// Upstream's ScalingReplicaSet message.
pub fn scaling_message(replicaset: &str, from: i32, to: i32) -> String {
    let direction = if to > from { "up" } else { "down" };
    format!("Scaled {direction} replica set {replicaset} from {from} to {to}")
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
    let events = ctx.events.reporting(COMPONENT);
    let (new, olds) = replicasets(&d, &rsapi, &events).await?;
    scale(&d, &rsapi, &events, &new, &olds).await?;
    report(&d, &Api::namespaced(ctx.client.clone(), &ns), &new, &olds).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixtures the rollout and status tests share.
    pub(super) fn deploy(replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web", "namespace": "default", "generation": 3, "uid": "d1" },
            "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web" } },
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
