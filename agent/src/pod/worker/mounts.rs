//! Before a pod's sandbox is made, as the kubelet's volume manager waits for its volumes: every
//! volume must be of a kind the agent sets up and every claim bound to a volume on this node.
//! Until then the pod does not start; the reason is a FailedMount event and its containers'
//! ContainerCreating message. A local-path volume is adopted here, before its directory is
//! made, so that its deletion waits for this node to remove the directory (`local_path`).

use k8s_openapi::api::core::v1::Pod;
use keelson_apimachinery::volumes::is_local_path;

use crate::pod::context::Context;
use crate::pod::{claims, local_path};

/// Ok when the pod's volumes can be set up, else the kubelet's "Unable to attach or mount
/// volumes" message naming them and why.
pub async fn ready(ctx: &Context, pod: &Pod) -> Result<(), String> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let unmounted = |names: &[&str], why: &str| {
        format!(
            "Unable to attach or mount volumes: unmounted volumes=[{}]: {why}",
            names.join(" ")
        )
    };
    for v in volumes.clone() {
        if let Some(kind) = claims::unsupported(v) {
            let why = format!("volume type {kind} is not supported by keelson-agent");
            return Err(unmounted(&[&v.name], &why));
        }
    }
    let bound = claims::bound_volumes(&ctx.client, pod).await.map_err(|e| {
        let names: Vec<&str> = volumes
            .filter(|v| v.persistent_volume_claim.is_some())
            .map(|v| v.name.as_str())
            .collect();
        unmounted(&names, &e.to_string())
    })?;
    for (name, dir, pv) in bound {
        if !is_local_path(&pv) {
            continue;
        }
        // Not fatal: the data is there either way; only its removal after reclaim Delete
        // would be left to an administrator.
        if let Err(e) = local_path::adopt(&ctx.client, &ctx.root, &pv, &dir.path).await {
            tracing::warn!(volume = %name, error = %e, "local-path volume not adopted: its directory will not be removed on reclaim");
        }
    }
    Ok(())
}
