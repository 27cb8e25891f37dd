//! Tearing a pod down: every container stopped (preStop first, within the grace period), the
//! sandboxes stopped and removed (CNI DEL releases the address), the pod's files removed, then the
//! API object deleted with grace 0 so `kubectl delete` returns.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};

use super::stop::{self, Stop};
use super::{observe, pod_key, SyncError};
use crate::pod::context::Context;
use crate::pod::decide::{self, find_container, is_sidecar, ContainerKind};
use crate::pod::events::Kind;
use crate::pod::observed::{ObservedContainer, ObservedPod, RunState};
use crate::pod::{translate, volumes};

/// The grace period of a pod the API no longer has (its spec is gone).
const ORPHAN_GRACE_SECONDS: i64 = 2;

/// Why the pod is being torn down.
pub enum Teardown {
    /// deletionTimestamp is set: stop within the grace period, then delete the API object.
    Deleted,
    /// The pod no longer exists in the API (force-deleted, or deleted while the agent was down).
    Orphaned,
}

/// Tears down the pod with UID `uid`; `pod` is its API object while the API still has it.
pub async fn run(
    ctx: &Context,
    uid: &str,
    pod: Option<&Pod>,
    why: Teardown,
) -> Result<(), SyncError> {
    let observed = observe::runtime(ctx.cri.as_ref(), uid).await?;
    stop_containers(ctx, pod, &observed, None).await?;
    for id in &observed.all_sandbox_ids {
        ctx.cri.stop_pod_sandbox(id).await?;
        ctx.cri.remove_pod_sandbox(id).await?;
    }
    if let Err(e) = ctx.cgroups.remove_pod(uid) {
        // A process still exiting: the cgroup sweep removes it later.
        tracing::debug!(pod = %uid, error = %e, "pod cgroup not removed yet");
    }
    remove_files(ctx, uid, pod);
    match (pod, why) {
        (Some(p), Teardown::Deleted) => {
            delete(&ctx.client, p).await?;
            tracing::info!(pod = %pod_key(p), "pod terminated and deleted");
        }
        _ => tracing::info!(pod = %uid, "pod no longer in the API: removed from the runtime"),
    }
    Ok(())
}

/// Stops the running containers: all at once, then the native sidecars, the last one first
/// (as upstream, so that they serve the main containers to the end); a container already gone
/// counts as stopped. `grace` overrides the pod's grace period (a node shutdown's).
pub(super) async fn stop_containers(
    ctx: &Context,
    pod: Option<&Pod>,
    observed: &ObservedPod,
    grace: Option<i64>,
) -> Result<(), SyncError> {
    let grace = grace.unwrap_or_else(|| pod.map_or(ORPHAN_GRACE_SECONDS, stop::grace_seconds));
    let sidecar = |c: &&ObservedContainer| {
        c.kind == ContainerKind::Init
            && pod
                .and_then(|p| find_container(p, &c.name, c.kind))
                .is_some_and(is_sidecar)
    };
    let running: Vec<&ObservedContainer> = observed
        .containers
        .iter()
        .filter(|c| c.state == RunState::Running)
        .collect();
    let (mut sidecars, main): (Vec<_>, Vec<_>) = running.into_iter().partition(sidecar);
    stop_all(ctx, pod, observed, &main, grace).await?;
    // Sidecars in the reverse of their order in the spec.
    let init = pod.map(decide::init_containers).unwrap_or_default();
    sidecars.sort_by_key(|c| std::cmp::Reverse(init.iter().position(|s| s.name == c.name)));
    for c in sidecars {
        stop_all(ctx, pod, observed, &[c], grace).await?;
    }
    Ok(())
}

/// Stops `containers` side by side.
async fn stop_all(
    ctx: &Context,
    pod: Option<&Pod>,
    observed: &ObservedPod,
    containers: &[&ObservedContainer],
    grace: i64,
) -> Result<(), SyncError> {
    let pod_ip = observed.pod_ip();
    let mut stops = Vec::new();
    for c in containers {
        if let Some(p) = pod {
            let msg = format!("Stopping container {}", c.name);
            ctx.events
                .pod(p, Some(&c.name), Kind::Normal, "Killing", msg);
        }
        let target = Stop {
            spec: pod.and_then(|p| find_container(p, &c.name, c.kind)),
            id: &c.id,
            pod_ip: &pod_ip,
            grace,
            report: pod.map(|p| (&ctx.events, p)),
        };
        stops.push(stop::container(ctx.cri.as_ref(), target));
    }
    for result in futures::future::join_all(stops).await {
        if let Err(e) = result {
            if !e.is_not_found() {
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// The pod's volumes and logs on the node.
fn remove_files(ctx: &Context, uid: &str, pod: Option<&Pod>) {
    let dir = ctx.root.join("pods").join(uid);
    crate::pod::volume_fs::unmount_below(&dir);
    if let Some(p) = pod {
        let _ = std::fs::remove_dir_all(volumes::pod_dir(&ctx.root, p));
        let _ = std::fs::remove_dir_all(translate::pod_log_dir(&ctx.settings, p));
    } else {
        let _ = std::fs::remove_dir_all(ctx.root.join("pods").join(uid));
    }
}

/// Deletes the API object with grace 0, for this UID only (a new pod of the same name stays).
async fn delete(client: &kube::Client, pod: &Pod) -> Result<(), SyncError> {
    let api: Api<Pod> = Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api
        .delete(pod.metadata.name.as_deref().unwrap_or(""), &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(source) => Err(SyncError::Api {
            action: "deleting",
            pod: pod_key(pod),
            source,
        }),
    }
}
