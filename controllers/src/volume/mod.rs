//! The PersistentVolume binder (upstream's persistentvolume-controller), with the pvc- and
//! pv-protection finalizers and the built-in local-path provisioner. Claims are bound to the
//! best Available volume (`plan`), or get one provisioned (`provision`) once the scheduler has
//! chosen the node of their first consumer (WaitForFirstConsumer); volumes follow their claims
//! through Bound, Released and their reclaim policy (`volumes`).
//!
//! Reads go to the API, not a watch cache: binding from a stale cache could give one volume
//! to two claims.

pub mod plan;
pub mod provision;
mod volumes;

use crate::api::{patch_merge, patch_status};
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use keelson_apimachinery::well_known::{
    BETA_STORAGE_PROVISIONER_ANNOTATION, BIND_COMPLETED_ANNOTATION, BOUND_BY_CONTROLLER_ANNOTATION,
    HOSTNAME_LABEL, PVC_PROTECTION_FINALIZER, SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
};
use keelson_daemon::events::EventType;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Upstream's name for the binder in Events.
pub const COMPONENT: &str = "persistentvolume-controller";

/// An unbound claim is looked at again this often (a volume or class may appear).
const UNBOUND_RETRY: Duration = Duration::from_secs(5);

/// Runs the claim and volume loops until SIGTERM or Ctrl-C.
pub async fn run(ctx: Arc<Ctx>) {
    futures::join!(claims(ctx.clone()), volumes::run(ctx));
}

/// Claims, woken by their own changes, the volumes that name them, and the pods that use them
/// (a pod's end releases a claim being deleted).
async fn claims(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        cfg.clone(),
    )
    .watches(
        Api::<PersistentVolume>::all(client.clone()),
        cfg.clone(),
        |pv| {
            pv.spec.and_then(|s| s.claim_ref).and_then(|r| {
                Some(ObjectRef::new(r.name.as_deref()?).within(r.namespace.as_deref()?))
            })
        },
    )
    .watches(Api::<Pod>::all(client), cfg, |pod: Pod| {
        let ns = pod.namespace().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| ObjectRef::new(&c.claim_name).within(&ns))
            .collect::<Vec<_>>()
    })
    .shutdown_on_signal()
    .run(reconcile_claim, error_policy, ctx.clone())
    .for_each(|_| {
        ctx.metrics.reconciles.inc();
        futures::future::ready(())
    })
    .await;
}

fn error_policy<K: ResourceExt>(obj: Arc<K>, e: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.errors.inc();
    tracing::warn!(name = %obj.name_any(), namespace = ?obj.namespace(), error = %e, "volume reconcile failed; retrying in 2 s");
    Action::requeue(Duration::from_secs(2))
}

fn claim_api(ctx: &Ctx, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
    Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default())
}

pub async fn reconcile_claim(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let api = claim_api(&ctx, &claim);
    if claim.metadata.deletion_timestamp.is_some() {
        return release_deleted_claim(&ctx, &api, &claim).await;
    }
    if !has_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
        set_finalizers(
            &api,
            &claim.metadata,
            with(&claim.metadata, PVC_PROTECTION_FINALIZER),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let spec = claim.spec.clone().unwrap_or_default();
    if spec.storage_class_name.is_none() {
        // Upstream's retroactive default class: a claim naming no class gets the default one.
        let classes = Api::<StorageClass>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await?;
        if let Some(class) = plan::default_class(&classes.items) {
            let patch = json!({"spec": {"storageClassName": class.name_any()}});
            patch_merge(&api, &claim.name_any(), &patch).await?;
            return Ok(Action::await_change());
        }
    }
    match spec.volume_name.as_deref().filter(|v| !v.is_empty()) {
        Some(volume) => sync_bound_claim(&ctx, &api, &claim, volume).await,
        None => sync_unbound_claim(&ctx, &api, &claim).await,
    }
}

/// pvc-protection: the finalizer goes once no unfinished pod uses the claim.
async fn release_deleted_claim(
    ctx: &Ctx,
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
) -> Result<Action, Error> {
    if !has_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    if plan::in_use(claim, &pods.list(&ListParams::default()).await?.items) {
        return Ok(Action::await_change());
    }
    set_finalizers(
        api,
        &claim.metadata,
        without(&claim.metadata, PVC_PROTECTION_FINALIZER),
    )
    .await?;
    Ok(Action::await_change())
}

/// A claim naming its volume: the volume's claimRef is made to match, then the claim is Bound.
async fn sync_bound_claim(
    ctx: &Ctx,
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
    volume: &str,
) -> Result<Action, Error> {
    let pvs = Api::<PersistentVolume>::all(ctx.client.clone());
    let Some(pv) = pvs.get_opt(volume).await? else {
        let message = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
        publish(ctx, claim, EventType::Warning, "ClaimLost", message);
        set_claim_phase(api, claim, json!({"phase": "Lost"})).await?;
        return Ok(Action::await_change());
    };
    let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let ours = claim_ref.is_some_and(|r| {
        r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
            && r.uid
                .as_ref()
                .is_none_or(|u| Some(u) == claim.metadata.uid.as_ref())
    });
    if claim_ref.is_none() || (ours && claim_ref.and_then(|r| r.uid.as_ref()).is_none()) {
        volumes::claim_for(&pvs, &pv, claim).await?;
    } else if !ours {
        let message = format!("volume \"{volume}\" already bound to a different claim.");
        publish(ctx, claim, EventType::Warning, "FailedBinding", message);
        return Ok(Action::requeue(UNBOUND_RETRY));
    }
    mark_bound(api, claim, &pv).await?;
    Ok(Action::await_change())
}

/// The claim's side of a binding: bind-completed, and status Bound with the volume's size and
/// access modes.
async fn mark_bound(
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
    pv: &PersistentVolume,
) -> Result<(), Error> {
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    if annotations
        .get(BIND_COMPLETED_ANNOTATION)
        .map(String::as_str)
        != Some("yes")
    {
        let patch = json!({"metadata": {"annotations": {BIND_COMPLETED_ANNOTATION: "yes"}}});
        patch_merge(api, &claim.name_any(), &patch).await?;
    }
    let spec = pv.spec.clone().unwrap_or_default();
    let status =
        json!({"phase": "Bound", "accessModes": spec.access_modes, "capacity": spec.capacity});
    set_claim_phase(api, claim, status).await
}

/// Writes the claim's status when it differs.
async fn set_claim_phase(
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
    status: serde_json::Value,
) -> Result<(), Error> {
    let current = serde_json::to_value(&claim.status).unwrap_or_default();
    let same = status
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| current.get(k) == Some(v) || (v.is_null() && current.get(k).is_none()));
    if !same {
        patch_status(api, &claim.name_any(), &json!({ "status": status })).await?;
    }
    Ok(())
}

/// An unbound claim: bound to the best volume there is, else provisioned, else Pending with
/// an Event saying why.
async fn sync_unbound_claim(
    ctx: &Ctx,
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
) -> Result<Action, Error> {
    let class_name = plan::claim_class(claim).to_string();
    let class = match class_name.as_str() {
        "" => None,
        name => {
            Api::<StorageClass>::all(ctx.client.clone())
                .get_opt(name)
                .await?
        }
    };
    let wait_for_consumer = class
        .as_ref()
        .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
    let selected = claim.annotations().get(SELECTED_NODE_ANNOTATION).cloned();
    set_claim_phase(api, claim, json!({"phase": "Pending"})).await?;
    if wait_for_consumer && selected.is_none() {
        let message = "waiting for first consumer to be created before binding";
        publish(
            ctx,
            claim,
            EventType::Normal,
            "WaitForFirstConsumer",
            message,
        );
        return Ok(Action::requeue(UNBOUND_RETRY));
    }
    let node = match &selected {
        Some(name) => Some(node_labels(ctx, name).await?),
        None => None,
    };
    let pvs = Api::<PersistentVolume>::all(ctx.client.clone());
    let all = pvs.list(&ListParams::default()).await?.items;
    let on_node = selected.as_deref().zip(node.as_ref());
    if let Some(pv) = plan::best_match(claim, &all, on_node) {
        volumes::claim_for(&pvs, pv, claim).await?;
        let patch = json!({"metadata": {"annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"}},
            "spec": {"volumeName": pv.name_any()}});
        patch_merge(api, &claim.name_any(), &patch).await?;
        return Ok(Action::await_change());
    }
    no_volume_yet(ctx, api, claim, class.as_ref(), selected.as_deref()).await
}

/// The node's labels, for matching a volume's nodeAffinity (its name alone when it is gone).
async fn node_labels(ctx: &Ctx, name: &str) -> Result<BTreeMap<String, String>, Error> {
    let node = Api::<Node>::all(ctx.client.clone()).get_opt(name).await?;
    let mut labels = node.and_then(|n| n.metadata.labels).unwrap_or_default();
    labels
        .entry(HOSTNAME_LABEL.into())
        .or_insert_with(|| name.into());
    Ok(labels)
}

/// No volume fits: provision one (local-path, on the selected node), or say who should.
async fn no_volume_yet(
    ctx: &Ctx,
    api: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
    selected: Option<&str>,
) -> Result<Action, Error> {
    let class_name = plan::claim_class(claim);
    let Some(class) = class else {
        let (kind, reason, message) = match class_name {
            "" => (
                EventType::Normal,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set"
                    .to_string(),
            ),
            name => (
                EventType::Warning,
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io \"{name}\" not found"),
            ),
        };
        publish(ctx, claim, kind, reason, message);
        return Ok(Action::requeue(UNBOUND_RETRY));
    };
    if claim.annotations().get(STORAGE_PROVISIONER_ANNOTATION) != Some(&class.provisioner) {
        let patch = json!({"metadata": {"annotations": {
            STORAGE_PROVISIONER_ANNOTATION: class.provisioner,
            BETA_STORAGE_PROVISIONER_ANNOTATION: class.provisioner}}});
        patch_merge(api, &claim.name_any(), &patch).await?;
    }
    if !provision::serves(class) {
        let message = format!("Waiting for a volume to be created either by the external provisioner '{}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.provisioner);
        publish(
            ctx,
            claim,
            EventType::Normal,
            "ExternalProvisioning",
            message,
        );
        return Ok(Action::requeue(UNBOUND_RETRY));
    }
    let Some(node) = selected else {
        let message = format!("the {} provisioner makes a directory on one node, so its class needs volumeBindingMode WaitForFirstConsumer", class.provisioner);
        publish(
            ctx,
            claim,
            EventType::Warning,
            "ProvisioningFailed",
            message,
        );
        return Ok(Action::requeue(UNBOUND_RETRY));
    };
    let pv = provision::volume(claim, class, node).map_err(|e| Error::Invalid(e.to_string()))?;
    let pvs = Api::<PersistentVolume>::all(ctx.client.clone());
    crate::api::create_if_absent(&pvs, &pv).await?;
    let message = format!("Successfully provisioned volume {}", pv.name_any());
    publish(
        ctx,
        claim,
        EventType::Normal,
        "ProvisioningSucceeded",
        message,
    );
    Ok(Action::requeue(Duration::from_secs(1)))
}

fn publish(
    ctx: &Ctx,
    claim: &PersistentVolumeClaim,
    kind: EventType,
    reason: &str,
    message: impl Into<String>,
) {
    ctx.events
        .reporting(COMPONENT)
        .publish(claim, kind, reason, message);
}

pub(crate) fn has_finalizer(meta: &kube::api::ObjectMeta, name: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == name)
}

pub(crate) fn with(meta: &kube::api::ObjectMeta, name: &str) -> Vec<String> {
    let mut all = meta.finalizers.clone().unwrap_or_default();
    all.push(name.to_string());
    all
}

pub(crate) fn without(meta: &kube::api::ObjectMeta, name: &str) -> Vec<String> {
    let mut all = meta.finalizers.clone().unwrap_or_default();
    all.retain(|f| f != name);
    all
}

/// Replaces the finalizers, conditional on the resourceVersion read (a concurrent change
/// fails with a conflict and is retried).
pub(crate) async fn set_finalizers<K>(
    api: &Api<K>,
    meta: &kube::api::ObjectMeta,
    finalizers: Vec<String>,
) -> Result<(), Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": meta.resource_version}});
    let name = meta.name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
