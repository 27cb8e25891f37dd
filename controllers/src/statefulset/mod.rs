//! The StatefulSet controller: stable pods `<set>-<ordinal>` with their claims (`identity`),
//! one ControllerRevision per template (`revision`), and the ordered steps and status
//! (`plan`). This file does the API calls.

pub mod identity;
pub mod plan;
pub mod revision;

use crate::api::{create_if_absent, delete_if_present, list_selected, patch_status};
use crate::is_not_found;
use crate::pods::{controller_of, is_controlled_by, owner_ref};
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::ResourceExt;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The Events' reporting component, as upstream's.
pub const COMPONENT: &str = "statefulset-controller";

/// Runs until SIGTERM or Ctrl-C: woken by StatefulSets and the pods they own.
pub async fn run(ctx: Arc<Ctx>) {
    let client = &ctx.client;
    let cfg = watcher::Config::default();
    Controller::new(Api::<StatefulSet>::all(client.clone()), cfg.clone())
        .owns(Api::<Pod>::all(client.clone()), cfg)
        .shutdown_on_signal()
        .run(reconcile, crate::error_policy, ctx.clone())
        .for_each(crate::counted(ctx.clone()))
        .await;
}

/// The set's own API handles.
struct Apis {
    pods: Api<Pod>,
    revisions: Api<ControllerRevision>,
    claims: Api<PersistentVolumeClaim>,
    sets: Api<StatefulSet>,
}

pub async fn reconcile(sts: Arc<StatefulSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if sts.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = sts.namespace().unwrap_or_default();
    let client = &ctx.client;
    let apis = Apis {
        pods: Api::namespaced(client.clone(), &ns),
        revisions: Api::namespaced(client.clone(), &ns),
        claims: Api::namespaced(client.clone(), &ns),
        sets: Api::namespaced(client.clone(), &ns),
    };
    let selected = list_selected(&sts.spec.selector)?;
    // Listed from the API rather than the watch cache: a cache that has not yet seen the pod
    // made on the previous pass would have this pass make it again.
    let set = sts.name_any();
    let listed = apis.pods.list(&selected).await?.items;
    let pods = adopt(&apis.pods, &sts, listed, |p| {
        identity::ordinal_of(&set, p).is_some()
    })
    .await?;
    let listed = apis.revisions.list(&selected).await?.items;
    let revisions = adopt(&apis.revisions, &sts, listed, |_| true).await?;
    let update = update_revision(&sts, &apis, &revisions).await?;
    let update_name = update.name_any();
    let current = sts
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref())
        .and_then(|name| {
            revisions
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
        })
        .unwrap_or(&update);
    let current_name = current.name_any();
    let inputs = plan::Inputs {
        sts: &sts,
        current: &current_name,
        update: &update_name,
        now: Timestamp::now(),
    };
    let plan = plan::plan(&inputs, &pods);
    apply(&sts, &ctx, &apis, &plan, (current, &update)).await?;
    prune(
        &sts,
        &apis,
        &revisions,
        &pods,
        [&current_name, &update_name],
    )
    .await?;
    if identity::deletes_claims_on_scale_down(&sts) {
        delete_scaled_away_claims(&sts, &ctx, &apis, &pods).await?;
    }
    if sts.status.as_ref() != Some(&plan.status) {
        let patch = serde_json::json!({ "status": plan.status });
        patch_status(&apis.sets, &sts.name_any(), &patch).await?;
    }
    // Ready pods wait out minReadySeconds before they count as available: look again soon.
    let waiting = plan.status.ready_replicas > plan.status.available_replicas;
    Ok(Action::requeue(Duration::from_secs(if waiting {
        1
    } else {
        300
    })))
}

/// Of `items` (selected by the set's selector), those the set controls, after adopting the
/// members no controller owns (as upstream's ClaimPods: a set deleted with --cascade=orphan and
/// made again takes its pods and revisions back instead of making new ones).
async fn adopt<K>(
    api: &Api<K>,
    sts: &StatefulSet,
    items: Vec<K>,
    member: impl Fn(&K) -> bool,
) -> Result<Vec<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let uid = sts.uid().unwrap_or_default();
    let mut out = Vec::new();
    for item in items {
        if is_controlled_by(&item, &uid) {
            out.push(item);
            continue;
        }
        let orphan = controller_of(&item).is_none() && item.meta().deletion_timestamp.is_none();
        if !orphan || !member(&item) {
            continue;
        }
        let mut owners = item.owner_references().to_vec();
        owners.push(owner_ref("apps/v1", "StatefulSet", &sts.name_any(), &uid));
        // The uid makes the patch fail if the object was replaced meanwhile.
        let patch =
            serde_json::json!({ "metadata": { "ownerReferences": owners, "uid": item.uid() } });
        let params = PatchParams::default();
        match api
            .patch(&item.name_any(), &params, &Patch::Merge(&patch))
            .await
        {
            Ok(adopted) => out.push(adopted),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// The revision of the set's template now: an existing one (renumbered as the newest when it
/// comes back, as after `rollout undo`), or a new one.
async fn update_revision(
    sts: &StatefulSet,
    apis: &Apis,
    revisions: &[ControllerRevision],
) -> Result<ControllerRevision, Error> {
    let chosen = revision::choose(sts, revisions);
    if let (Some(existing), Some((name, number))) = (&chosen.update, &chosen.renumber) {
        let patch = serde_json::json!({ "revision": number });
        let params = PatchParams::default();
        apis.revisions
            .patch(name, &params, &Patch::Merge(&patch))
            .await?;
        let mut renumbered = existing.clone();
        renumbered.revision = Some(*number);
        return Ok(renumbered);
    }
    if let Some(existing) = chosen.update {
        return Ok(existing);
    }
    let collisions = sts
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let rev = revision::new_revision(sts, chosen.next, collisions);
    match apis.revisions.create(&PostParams::default(), &rev).await {
        Ok(made) => Ok(made),
        Err(kube::Error::Api(e)) if e.is_already_exists() => {
            let there = apis.revisions.get(&rev.name_any()).await?;
            let data = revision::patch(sts);
            if is_controlled_by(&there, &sts.uid().unwrap_or_default())
                && revision::same_data(&there, &data)
            {
                return Ok(there);
            }
            // Another object has the name: the next pass hashes with a higher count, as upstream.
            let patch = serde_json::json!({ "status": { "collisionCount": collisions + 1 } });
            patch_status(&apis.sets, &sts.name_any(), &patch).await?;
            Err(Error::Invalid(format!(
                "ControllerRevision {} exists with other data: trying again with collisionCount {}",
                rev.name_any(),
                collisions + 1
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Makes the plan's claims, pods and deletions, with upstream's Events on the set.
async fn apply(
    sts: &StatefulSet,
    ctx: &Ctx,
    apis: &Apis,
    plan: &plan::Plan,
    (current, update): (&ControllerRevision, &ControllerRevision),
) -> Result<(), Error> {
    let set = sts.name_any();
    let events = ctx.events.reporting(COMPONENT);
    if !plan.claims.is_empty() {
        ensure_claims(sts, ctx, apis, &plan.claims).await?;
    }
    for (ordinal, from_update) in &plan.create {
        let rev = if *from_update { update } else { current };
        let template = revision::template_of(rev).unwrap_or_else(|| sts.spec.template.clone());
        let pod = identity::new_pod(sts, &template, &rev.name_any(), *ordinal);
        let name = pod.name_any();
        if let Err(e) = create_if_absent(&apis.pods, &pod).await {
            let message = format!("create Pod {name} in StatefulSet {set} failed error: {e}");
            events.publish(sts, EventType::Warning, "FailedCreate", message);
            return Err(e.into());
        }
        let message = format!("create Pod {name} in StatefulSet {set} successful");
        events.publish(sts, EventType::Normal, "SuccessfulCreate", message);
    }
    for name in &plan.delete {
        delete_if_present(&apis.pods, name, &DeleteParams::default()).await?;
        let message = format!("delete Pod {name} in StatefulSet {set} successful");
        events.publish(sts, EventType::Normal, "SuccessfulDelete", message);
    }
    if !plan.create.is_empty() || !plan.delete.is_empty() {
        tracing::info!(statefulset = %set, namespace = ?sts.namespace(), created = ?plan.create, deleted = ?plan.delete, "synced stateful pods");
    }
    Ok(())
}

/// Creates the claims of `ordinals` that do not exist yet (before their pods, so a pod never
/// starts without its volume). Existing claims are left as they are: they keep the data.
async fn ensure_claims(
    sts: &StatefulSet,
    ctx: &Ctx,
    apis: &Apis,
    ordinals: &[i32],
) -> Result<(), Error> {
    let wanted: Vec<(i32, PersistentVolumeClaim)> = ordinals
        .iter()
        .flat_map(|o| identity::claims(sts, *o).into_iter().map(|c| (*o, c)))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let existing: BTreeSet<String> = apis
        .claims
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    let set = sts.name_any();
    let events = ctx.events.reporting(COMPONENT);
    for (ordinal, claim) in wanted
        .iter()
        .filter(|(_, c)| !existing.contains(&c.name_any()))
    {
        let name = claim.name_any();
        // Upstream's wording: "create Claim data-web-0 Pod web-0 in StatefulSet web success".
        let what = format!(
            "Claim {name} Pod {} in StatefulSet {set}",
            identity::pod_name(&set, *ordinal)
        );
        if let Err(e) = create_if_absent(&apis.claims, claim).await {
            let message = format!("create {what} failed error: {e}");
            events.publish(sts, EventType::Warning, "FailedCreate", message);
            return Err(e.into());
        }
        let message = format!("create {what} success");
        events.publish(sts, EventType::Normal, "SuccessfulCreate", message);
    }
    Ok(())
}

/// With `whenScaled: Delete`, deletes the claims of ordinals past the set's range whose pods
/// are gone (the pvc-protection finalizer holds each until no pod uses it).
async fn delete_scaled_away_claims(
    sts: &StatefulSet,
    ctx: &Ctx,
    apis: &Apis,
    pods: &[Pod],
) -> Result<(), Error> {
    let names: Vec<String> = apis
        .claims
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    let set = sts.name_any();
    for name in identity::scaled_away_claims(sts, &names, pods) {
        delete_if_present(&apis.claims, &name, &DeleteParams::default()).await?;
        let message = format!("delete Claim {name} in StatefulSet {set} success");
        let events = ctx.events.reporting(COMPONENT);
        events.publish(sts, EventType::Normal, "SuccessfulDelete", message);
    }
    Ok(())
}

/// Deletes the revisions past revisionHistoryLimit that no pod runs.
async fn prune(
    sts: &StatefulSet,
    apis: &Apis,
    revisions: &[ControllerRevision],
    pods: &[Pod],
    keep: [&str; 2],
) -> Result<(), Error> {
    let limit = sts.spec.revision_history_limit.unwrap_or(10);
    for name in revision::prune(revisions, pods, &keep, limit) {
        delete_if_present(&apis.revisions, &name, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod revision_tests;
