//! Measures a pod's local storage for `local_storage::check`: its disk-backed emptyDirs (blocks
//! on disk), and each container's writable layer (as the runtime reports it) and log files.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use keelson_proto::runtime::v1 as cri;

use crate::pod::context::Context;
use crate::pod::local_storage::{self, Usage};
use crate::pod::observed::ObservedPod;
use crate::pod::security::Rejection;
use crate::pod::volumes;

/// How often a pod with limits is measured (the kubelet's eviction monitoring interval).
pub const INTERVAL: Duration = Duration::from_secs(10);

/// When the pod was last measured, so a burst of syncs measures once.
#[derive(Default)]
pub struct StorageCheck {
    last: Option<Instant>,
}

impl StorageCheck {
    /// The eviction the pod's usage calls for, if it is due for a measurement and over a limit.
    pub async fn evict(
        &mut self,
        ctx: &Context,
        pod: &Pod,
        observed: &ObservedPod,
    ) -> Option<Rejection> {
        if !local_storage::has_limits(pod) || self.last.is_some_and(|t| t.elapsed() < INTERVAL) {
            return None;
        }
        self.last = Some(Instant::now());
        let usage = measure(ctx, pod, observed).await;
        tracing::debug!(pod = %crate::pod::format_pod(pod), ?usage, "local storage");
        local_storage::check(pod, &usage)
    }
}

async fn measure(ctx: &Context, pod: &Pod, observed: &ObservedPod) -> Usage {
    let mut usage = Usage::default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    for v in volumes.unwrap_or_default() {
        let on_disk = v
            .empty_dir
            .as_ref()
            .is_some_and(|e| e.medium.as_deref().unwrap_or_default().is_empty());
        if on_disk {
            let dir = volumes::volume_dir(&ctx.root, pod, &v.name);
            let bytes = tokio::task::spawn_blocking(move || local_storage::disk_usage(&dir));
            usage
                .empty_dirs
                .insert(v.name.clone(), bytes.await.unwrap_or(0));
        }
    }
    let Some(sandbox) = observed.sandbox.as_ref() else {
        return usage;
    };
    let filter = cri::ContainerStatsFilter {
        pod_sandbox_id: sandbox.id.clone(),
        ..Default::default()
    };
    let stats = ctx
        .cri
        .list_container_stats(filter)
        .await
        .unwrap_or_default();
    for c in &observed.containers {
        let layer = stats
            .iter()
            .find(|s| s.attributes.as_ref().is_some_and(|a| a.id == c.id))
            .and_then(|s| s.writable_layer.as_ref())
            .and_then(|w| w.used_bytes.as_ref())
            .map_or(0, |b| b.value);
        // Every attempt's log is in the container's own directory: counted once per name.
        let used = usage.containers.entry(c.name.clone()).or_insert_with(|| {
            let dir = std::path::Path::new(&c.log_path).parent();
            dir.map_or(0, local_storage::disk_usage)
        });
        *used += layer;
    }
    usage
}
