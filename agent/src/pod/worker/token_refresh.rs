//! Renewing the service-account tokens of a running pod: when one is due (80% of its lifetime,
//! or 24 hours), the pod's projected volumes are written again with the new token, atomically
//! (`atomic_writer`), so the containers read the fresh token from the same path.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::sources;
use crate::pod::context::Context;
use crate::pod::events::Kind;
use crate::pod::{tokens, volumes};

/// Renews the pod's tokens that are due and rewrites its volumes; returns how long until the
/// next renewal (None when the pod has no tokens yet: its first container start fetches them).
pub async fn refresh(ctx: &Context, pod: &Pod) -> Option<Duration> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let due = ctx.tokens.next_refresh(uid)?;
    if SystemTime::now() >= due && volumes_written(ctx, pod) {
        if let Err(message) = rewrite(ctx, pod).await {
            ctx.events
                .pod(pod, None, Kind::Warning, "FailedMount", message.clone());
            tracing::warn!(pod = %super::pod_key(pod), error = %message, "token renewal failed");
            return Some(Duration::from_secs(5));
        }
    }
    let next = ctx.tokens.next_refresh(uid)?;
    Some(
        next.duration_since(SystemTime::now())
            .unwrap_or(Duration::from_secs(1)),
    )
}

/// Whether the pod's volumes exist on the node (a container has started).
fn volumes_written(ctx: &Context, pod: &Pod) -> bool {
    volumes::pod_dir(&ctx.root, pod).join("volumes").is_dir()
}

async fn rewrite(ctx: &Context, pod: &Pod) -> Result<(), String> {
    // No container: only what the volumes refer to is read.
    let (_, mut objects) = sources::fetch(&ctx.client, pod, &Container::default())
        .await
        .map_err(|e| e.to_string())?;
    objects.tokens = ctx
        .tokens
        .for_pod(&ctx.client, pod)
        .await
        .map_err(|e| e.to_string())?;
    objects.claims = crate::pod::claims::resolve(&ctx.client, pod)
        .await
        .map_err(|e| e.to_string())?;
    volumes::prepare(&ctx.root, pod, &objects).map_err(|e| e.to_string())?;
    Ok(())
}

/// The pod's tokens for its first container start; a failure is also a pod event, as the
/// kubelet reports a volume it cannot set up.
pub async fn fetch(
    ctx: &Context,
    pod: &Pod,
) -> Result<std::collections::BTreeMap<tokens::TokenSpec, String>, String> {
    ctx.tokens.for_pod(&ctx.client, pod).await.map_err(|e| {
        let message = format!("MountVolume.SetUp failed: {e}");
        ctx.events
            .pod(pod, None, Kind::Warning, "FailedMount", message.clone());
        message
    })
}
