//! Reclaim Delete of local-path volumes on this node. The binder deletes a Released volume
//! whose reclaim policy is Delete; only this node can remove its directory. So when a pod first
//! mounts such a volume, the agent puts its finalizer on the volume and records the directory
//! under `<root>/local-path/<volume>`; a sweep then finds recorded volumes being deleted,
//! removes the directory (Delete only: a Retain volume deleted by hand keeps its data, as
//! upstream) and then the finalizer, so the volume object goes only after its data.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use keelson_apimachinery::well_known::LOCAL_PATH_DIRECTORY_FINALIZER;
use kube::api::{Api, Patch, PatchParams};

fn records(root: &Path) -> PathBuf {
    root.join("local-path")
}

fn finalizers(pv: &PersistentVolume) -> Vec<String> {
    pv.metadata.finalizers.clone().unwrap_or_default()
}

/// Replaces the volume's finalizers, conditional on the version read.
async fn set_finalizers(
    api: &Api<PersistentVolume>,
    pv: &PersistentVolume,
    list: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"finalizers": list,
        "resourceVersion": pv.metadata.resource_version}});
    let name = pv.metadata.name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Records the volume's directory and puts the agent's finalizer on it (once).
pub async fn adopt(
    client: &kube::Client,
    root: &Path,
    pv: &PersistentVolume,
    dir: &Path,
) -> Result<(), String> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    let record = records(root).join(&name);
    std::fs::create_dir_all(records(root))
        .and_then(|()| std::fs::write(&record, dir.as_os_str().as_encoded_bytes()))
        .map_err(|e| format!("recording {}: {e}", record.display()))?;
    let mut list = finalizers(pv);
    if list.iter().any(|f| f == LOCAL_PATH_DIRECTORY_FINALIZER) {
        return Ok(());
    }
    list.push(LOCAL_PATH_DIRECTORY_FINALIZER.into());
    let api: Api<PersistentVolume> = Api::all(client.clone());
    set_finalizers(&api, pv, list)
        .await
        .map_err(|e| format!("adding finalizer to persistentvolume {name}: {e}"))
}

/// Sweeps the recorded volumes every `every`, forever.
pub async fn run(client: kube::Client, root: PathBuf, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let Ok(entries) = std::fs::read_dir(records(&root)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Err(e) = reclaim(&client, &entry.path(), &name).await {
                tracing::warn!(volume = %name, error = %e, "local-path volume cleanup failed; retrying");
            }
        }
    }
}

/// One recorded volume: nothing while it lives; once it is being deleted, its directory (for
/// Delete), then the finalizer and the record.
async fn reclaim(client: &kube::Client, record: &Path, name: &str) -> Result<(), String> {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let pv = match keelson_daemon::get_opt(&api, name).await {
        Ok(Some(pv)) => pv,
        // Gone without us (the finalizer removed by hand): the data stays, as upstream leaves
        // a volume deleted outside its reclaim policy.
        Ok(None) => return std::fs::remove_file(record).map_err(|e| e.to_string()),
        Err(e) => return Err(e.to_string()),
    };
    if pv.metadata.deletion_timestamp.is_none() {
        return Ok(());
    }
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    if policy == Some("Delete") {
        let dir = PathBuf::from(
            String::from_utf8_lossy(&std::fs::read(record).map_err(|e| e.to_string())?)
                .into_owned(),
        );
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("removing {}: {e}", dir.display()))
            }
            _ => tracing::info!(volume = %name, dir = %dir.display(), "local-path volume deleted"),
        }
    }
    let mut list = finalizers(&pv);
    list.retain(|f| f != LOCAL_PATH_DIRECTORY_FINALIZER);
    set_finalizers(&api, &pv, list)
        .await
        .map_err(|e| e.to_string())?;
    std::fs::remove_file(record).map_err(|e| e.to_string())
}
