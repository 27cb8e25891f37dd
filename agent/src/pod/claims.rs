//! A pod's persistentVolumeClaim volumes on this node: each claim must be Bound, and its
//! PersistentVolume must be one this node can mount (hostPath or local, a directory here).
//! Anything else is an error the pod waits on, with a FailedMount event: never an empty
//! directory in its place, which would lose data the user believes is kept.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use keelson_apimachinery::volumes::POD_VOLUME_SOURCES;
use kube::api::Api;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where a bound claim's data is on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimDir {
    pub path: PathBuf,
    /// Made when missing (hostPath DirectoryOrCreate, as the local-path provisioner asks).
    pub create: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("persistentvolumeclaim \"{0}\" not found")]
    NotFound(String),
    #[error("error processing PVC {namespace}/{name}: PVC is not bound")]
    NotBound { namespace: String, name: String },
    #[error("persistentvolume \"{0}\" not found")]
    VolumeNotFound(String),
    #[error(
        "persistentvolume \"{0}\" is neither hostPath nor local, which keelson-agent cannot mount"
    )]
    UnsupportedVolume(String),
    #[error("reading {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// The volume kinds the agent sets up; every other kind stops the pod with an event.
pub fn unsupported(v: &Volume) -> Option<&'static str> {
    let json = serde_json::to_value(v).unwrap_or_default();
    // A source this API version does not know is dropped when the pod is read, leaving only
    // the name (the API server makes a volume without any source an emptyDir): unsupported.
    let Some(kind) = json
        .as_object()
        .and_then(|o| o.keys().find(|k| k.as_str() != "name"))
        .map(String::as_str)
    else {
        return Some("unknown");
    };
    const SUPPORTED: &[&str] = &[
        "emptyDir",
        "hostPath",
        "configMap",
        "secret",
        "downwardAPI",
        "projected",
        "persistentVolumeClaim",
    ];
    match SUPPORTED.contains(&kind) {
        true => None,
        false => Some(
            POD_VOLUME_SOURCES
                .iter()
                .find(|k| **k == kind)
                .copied()
                .unwrap_or("unknown"),
        ),
    }
}

/// The directory of each persistentVolumeClaim volume of the pod, by volume name.
pub async fn resolve(
    client: &kube::Client,
    pod: &Pod,
) -> Result<BTreeMap<String, ClaimDir>, ClaimError> {
    let found = bound_volumes(client, pod).await?;
    Ok(found
        .into_iter()
        .map(|(name, dir, _)| (name, dir))
        .collect())
}

/// Each persistentVolumeClaim volume of the pod: its name, directory and bound volume.
pub async fn bound_volumes(
    client: &kube::Client,
    pod: &Pod,
) -> Result<Vec<(String, ClaimDir, PersistentVolume)>, ClaimError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let mut out = Vec::new();
    let pvc_volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for v in pvc_volumes {
        let Some(source) = &v.persistent_volume_claim else {
            continue;
        };
        let name = &source.claim_name;
        let api_err = |what: String| move |source| ClaimError::Api { what, source };
        let claim = keelson_daemon::get_opt(&claims, name)
            .await
            .map_err(api_err(format!("persistentvolumeclaim {ns}/{name}")))?
            .ok_or_else(|| ClaimError::NotFound(name.clone()))?;
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone());
        let Some(volume_name) = volume_name.filter(|n| bound && !n.is_empty()) else {
            return Err(ClaimError::NotBound {
                namespace: ns.to_string(),
                name: name.clone(),
            });
        };
        let pv = keelson_daemon::get_opt(&volumes, &volume_name)
            .await
            .map_err(api_err(format!("persistentvolume {volume_name}")))?
            .ok_or_else(|| ClaimError::VolumeNotFound(volume_name.clone()))?;
        out.push((v.name.clone(), dir_of(&pv)?, pv));
    }
    Ok(out)
}

/// Where the volume's data is on this node.
pub fn dir_of(pv: &PersistentVolume) -> Result<ClaimDir, ClaimError> {
    let spec = pv.spec.as_ref();
    let name = pv.metadata.name.clone().unwrap_or_default();
    if let Some(hp) = spec.and_then(|s| s.host_path.as_ref()) {
        return Ok(ClaimDir {
            path: PathBuf::from(&hp.path),
            create: hp.type_.as_deref() == Some("DirectoryOrCreate"),
        });
    }
    if let Some(local) = spec.and_then(|s| s.local.as_ref()) {
        return Ok(ClaimDir {
            path: PathBuf::from(&local.path),
            create: false,
        });
    }
    Err(ClaimError::UnsupportedVolume(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_kinds_the_agent_sets_up_are_supported() {
        let v = |j: serde_json::Value| -> Volume { serde_json::from_value(j).unwrap() };
        assert_eq!(unsupported(&v(json!({"name": "a", "emptyDir": {}}))), None);
        assert_eq!(
            unsupported(&v(
                json!({"name": "a", "persistentVolumeClaim": {"claimName": "c"}})
            )),
            None
        );
        assert_eq!(
            unsupported(&v(
                json!({"name": "a", "nfs": {"server": "s", "path": "/"}})
            )),
            Some("nfs")
        );
        assert_eq!(
            unsupported(&v(json!({"name": "a", "gitRepo": {"repository": "r"}}))),
            Some("gitRepo")
        );
        assert_eq!(unsupported(&v(json!({"name": "a"}))), Some("unknown"));
    }

    #[test]
    fn host_path_and_local_volumes_are_directories() {
        let pv = |spec: serde_json::Value| -> PersistentVolume {
            serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": spec})).unwrap()
        };
        let made = dir_of(&pv(
            json!({"hostPath": {"path": "/d", "type": "DirectoryOrCreate"}}),
        ));
        assert_eq!(
            made.unwrap(),
            ClaimDir {
                path: "/d".into(),
                create: true
            }
        );
        let local = dir_of(&pv(json!({"local": {"path": "/mnt/disk"}}))).unwrap();
        assert!(!local.create);
        let nfs = dir_of(&pv(json!({"nfs": {"server": "s", "path": "/"}}))).unwrap_err();
        assert_eq!(
            nfs.to_string(),
            "persistentvolume \"pv\" is neither hostPath nor local, which keelson-agent cannot mount"
        );
    }
}
