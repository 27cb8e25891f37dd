//! The directory as a pod source: read before the first relist (`load`), then every
//! `--file-check-frequency` (`run`), with the mirror pods kept in the API server.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::{from_manifest, is_mirror, mirror_of, MIRROR_ANNOTATION};
use crate::pod::context::Context;
use crate::pod::manager::Manager;

/// Every manifest in `dir` (.yaml, .yml, .json; hidden files skipped), by UID; a file that is
/// not a Pod is logged and skipped, as the kubelet does.
fn read_dir(dir: &Path, node: &str) -> BTreeMap<String, Arc<Pod>> {
    let mut pods = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return pods;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let manifest = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
        if name.starts_with('.') || !manifest || !path.is_file() {
            continue;
        }
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| format!("{name}: {e}"))
            .and_then(|text| from_manifest(&text, &path.display().to_string(), node));
        match parsed {
            Ok(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                pods.insert(uid, Arc::new(pod));
            }
            Err(e) => tracing::warn!(error = %e, "static pod manifest skipped"),
        }
    }
    pods
}

/// Reads the manifests once (before the runtime is first relisted).
pub fn load(ctx: &Context, dir: &Path) {
    let pods = read_dir(dir, &ctx.settings.node_name);
    tracing::info!(dir = %dir.display(), pods = pods.len(), "static pods read");
    ctx.replace_static_pods(pods);
}

/// Reads `dir` every `every`: new, changed and removed manifests start, replace and stop their
/// pods; the mirror pods follow whenever the API server answers.
pub async fn run(
    ctx: Arc<Context>,
    manager: Arc<Manager>,
    dir: std::path::PathBuf,
    every: Duration,
) {
    let node = ctx.settings.node_name.clone();
    let mut first = true;
    loop {
        let current = read_dir(&dir, &node);
        let previous = ctx.replace_static_pods(current.clone());
        for uid in previous.keys().chain(current.keys()) {
            // The first round starts every static pod's worker (those `load` read too).
            if first || previous.contains_key(uid) != current.contains_key(uid) {
                manager.sync(uid).await;
            }
        }
        first = false;
        if let Err(e) = mirror(&ctx, &current).await {
            tracing::debug!(error = %e, "mirror pods not updated; trying again");
        }
        tokio::time::sleep(every).await;
    }
}

/// Creates the mirror pods that are missing, replaces those of another version of the manifest,
/// and deletes those whose static pod is gone.
async fn mirror(ctx: &Context, statics: &BTreeMap<String, Arc<Pod>>) -> Result<(), kube::Error> {
    let node_name = &ctx.settings.node_name;
    let mirrors: Vec<Arc<Pod>> = ctx
        .pods
        .read()
        .values()
        .filter(|p| is_mirror(p))
        .cloned()
        .collect();
    let hash_of = |p: &Pod| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIRROR_ANNOTATION))
            .cloned()
            .unwrap_or_default()
    };
    // A mirror pod a user deleted, or of a static pod that is gone, goes at once (grace 0: it
    // runs nothing); the static pod's next round makes a fresh one.
    for m in &mirrors {
        if !statics.contains_key(&hash_of(m)) || m.metadata.deletion_timestamp.is_some() {
            delete(ctx, m).await?;
        }
    }
    let mirrors: Vec<&Arc<Pod>> = mirrors
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    let node: Option<Node> =
        keelson_daemon::get_opt(&Api::<Node>::all(ctx.client.clone()), node_name).await?;
    let Some(node) = node else {
        return Ok(());
    };
    for (uid, pod) in statics {
        if mirrors
            .iter()
            .any(|m| hash_of(m) == *uid && m.metadata.name == pod.metadata.name)
        {
            continue;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
        match api
            .create(&PostParams::default(), &mirror_of(pod, &node))
            .await
        {
            Ok(_) => tracing::info!(pod = %crate::pod::format_pod(pod), "mirror pod created"),
            // An older mirror of the same name: it goes; the next round creates this one.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                if let Some(old) = mirrors
                    .iter()
                    .find(|m| m.metadata.name == pod.metadata.name)
                {
                    delete(ctx, old).await?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn delete(ctx: &Context, mirror: &Pod) -> Result<(), kube::Error> {
    let ns = mirror.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: mirror.metadata.uid.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = mirror.metadata.name.as_deref().unwrap_or_default();
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
