//! The volume side of the binder: phases (Available, Bound, Released, Failed), the reclaim
//! policy once the claim is gone, and pv-protection.
//!
//! Reclaim Delete of a local-path volume deletes the PersistentVolume object; Retain keeps it
//! (Released) and its directory. The controller cannot reach a node's disk: the agent of the
//! volume's node, which put its keelson.dev/local-path-directory finalizer on the volume when a
//! pod first mounted it, removes the directory and then the finalizer
//! (agent/src/pod/local_path.rs).

use super::{has_finalizer, plan, set_finalizers, with, without, COMPONENT};
use crate::api::{delete_if_present, patch_merge, patch_status};
use crate::{Ctx, Error};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use keelson_apimachinery::volumes::is_local_path;
use keelson_apimachinery::well_known::{BOUND_BY_CONTROLLER_ANNOTATION, PV_PROTECTION_FINALIZER};
use keelson_daemon::events::EventType;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Volumes, woken by their own changes and by the claims they name.
pub async fn run(ctx: Arc<Ctx>) {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default();
    let controller = Controller::new(Api::<PersistentVolume>::all(client.clone()), cfg.clone());
    let store = controller.store();
    controller
        .watches(
            Api::<PersistentVolumeClaim>::all(client),
            cfg,
            move |claim| {
                let (ns, name) = (claim.namespace(), claim.name_any());
                store
                    .state()
                    .iter()
                    .filter(|pv| {
                        pv.spec
                            .as_ref()
                            .and_then(|s| s.claim_ref.as_ref())
                            .is_some_and(|r| {
                                r.name.as_deref() == Some(name.as_str()) && r.namespace == ns
                            })
                    })
                    .map(|pv| ObjectRef::from_obj(pv.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .shutdown_on_signal()
        .run(reconcile, super::error_policy, ctx.clone())
        .for_each(|_| {
            ctx.metrics.reconciles.inc();
            futures::future::ready(())
        })
        .await;
}

/// Points the volume's claimRef at the claim (with its uid), then marks it Bound.
pub async fn claim_for(
    api: &Api<PersistentVolume>,
    pv: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), Error> {
    let patch = json!({
        "metadata": {"resourceVersion": pv.metadata.resource_version,
            "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"}},
        "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": claim.metadata.namespace, "name": claim.metadata.name,
            "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version}},
    });
    patch_merge(api, &pv.name_any(), &patch).await?;
    patch_status(api, &pv.name_any(), &json!({"status": {"phase": "Bound"}})).await?;
    Ok(())
}

pub async fn reconcile(pv: Arc<PersistentVolume>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let api = Api::<PersistentVolume>::all(ctx.client.clone());
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
    let deleting = pv.metadata.deletion_timestamp.is_some();
    if !deleting && !has_finalizer(&pv.metadata, PV_PROTECTION_FINALIZER) {
        let finalizers = with(&pv.metadata, PV_PROTECTION_FINALIZER);
        set_finalizers(&api, &pv.metadata, finalizers).await?;
        return Ok(Action::await_change());
    }
    let claim = claim_of(&ctx, &pv).await?;
    let side = match &claim {
        None => plan::ClaimSide::None,
        Some(Some(c)) => plan::ClaimSide::Present(c),
        Some(None) => plan::ClaimSide::Gone,
    };
    let want = plan::volume_phase(&pv, &side);
    if deleting {
        // pv-protection: a volume being deleted goes once no claim is bound to it.
        set_phase(&api, &pv, phase, want, None).await?;
        if want != "Bound" && has_finalizer(&pv.metadata, PV_PROTECTION_FINALIZER) {
            let finalizers = without(&pv.metadata, PV_PROTECTION_FINALIZER);
            set_finalizers(&api, &pv.metadata, finalizers).await?;
        }
        return Ok(Action::await_change());
    }
    if want == "Released" {
        return reclaim(&ctx, &api, &pv, phase).await;
    }
    set_phase(&api, &pv, phase, want, None).await?;
    Ok(Action::await_change())
}

/// The claim the volume's claimRef names: None without a claimRef, Some(None) when that
/// claim is gone (or is another with the same name).
async fn claim_of(
    ctx: &Ctx,
    pv: &PersistentVolume,
) -> Result<Option<Option<PersistentVolumeClaim>>, Error> {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Ok(None);
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(
        ctx.client.clone(),
        r.namespace.as_deref().unwrap_or("default"),
    );
    let found = claims
        .get_opt(r.name.as_deref().unwrap_or_default())
        .await?;
    Ok(Some(
        found.filter(|c| r.uid.is_none() || c.metadata.uid == r.uid),
    ))
}

async fn set_phase(
    api: &Api<PersistentVolume>,
    pv: &PersistentVolume,
    phase: Option<&str>,
    want: &str,
    message: Option<&str>,
) -> Result<(), Error> {
    if phase != Some(want) {
        let status = json!({"status": {"phase": want, "message": message}});
        patch_status(api, &pv.name_any(), &status).await?;
    }
    Ok(())
}

/// The claim is gone: Retain keeps the volume Released; Delete removes a volume this
/// provisioner made; anything else cannot be reclaimed here (Failed, as upstream says when no
/// plugin can delete or recycle it).
async fn reclaim(
    ctx: &Ctx,
    api: &Api<PersistentVolume>,
    pv: &PersistentVolume,
    phase: Option<&str>,
) -> Result<Action, Error> {
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    let events = ctx.events.reporting(COMPONENT);
    match policy {
        "Delete" if is_local_path(pv) => {
            set_phase(api, pv, phase, "Released", None).await?;
            delete_if_present(api, &pv.name_any(), &DeleteParams::default()).await?;
            tracing::info!(volume = %pv.name_any(), "claim gone; volume deleted (reclaim policy Delete)");
        }
        "Retain" => set_phase(api, pv, phase, "Released", None).await?,
        other => {
            let message = match other {
                "Delete" => format!("Error getting deleter volume plugin for volume \"{}\": no deletable volume plugin matched", pv.name_any()),
                _ => format!("reclaim policy {other} is not supported"),
            };
            if phase != Some("Failed") {
                events.publish(
                    pv,
                    EventType::Warning,
                    "VolumeFailedDelete",
                    message.clone(),
                );
            }
            set_phase(api, pv, phase, "Failed", Some(&message)).await?;
        }
    }
    Ok(Action::requeue(Duration::from_secs(60)))
}
