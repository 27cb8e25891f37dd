//! The built-in local-path provisioner (as k3s's rancher.io/local-path): a claim of a class with
//! this provisioner gets a hostPath volume `<root>/<pv name>` on the node the scheduler chose
//! for its first consumer, with nodeAffinity to that node. The directory itself is made by the
//! agent on that node when it mounts the volume (hostPath type DirectoryOrCreate), and removed
//! by it after reclaim Delete.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use keelson_apimachinery::well_known::{
    HOSTNAME_LABEL, LOCAL_PATH_PROVISIONER, PROVISIONED_BY_ANNOTATION,
};
use serde_json::json;

/// Where the volumes' directories are on every node, unless the class's `nodePath`
/// parameter says otherwise.
pub const DEFAULT_ROOT: &str = "/var/lib/keelson/storage";

/// The volume's name for the claim: pvc-<claim uid>, as upstream's provisioning controller.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// The PersistentVolume for `claim` on `node`, pre-bound to the claim (claimRef with its uid).
pub fn volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &str,
) -> Result<PersistentVolume, serde_json::Error> {
    let name = volume_name(claim);
    let root = class
        .parameters
        .as_ref()
        .and_then(|p| p.get("nodePath"))
        .map(String::as_str)
        .unwrap_or(DEFAULT_ROOT);
    let spec = claim.spec.clone().unwrap_or_default();
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "0".into());
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": { PROVISIONED_BY_ANNOTATION: LOCAL_PATH_PROVISIONER },
        },
        "spec": {
            "capacity": { "storage": storage },
            "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "storageClassName": class.metadata.name,
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "mountOptions": class.mount_options,
            "hostPath": { "path": format!("{root}/{name}"), "type": "DirectoryOrCreate" },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": HOSTNAME_LABEL, "operator": "In", "values": [node] }
            ]}]}},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": claim.metadata.namespace, "name": claim.metadata.name,
                "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version,
            },
        },
    }))
}

/// Whether the built-in provisioner serves this class.
pub fn serves(class: &StorageClass) -> bool {
    class.provisioner == LOCAL_PATH_PROVISIONER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volume_is_a_directory_on_the_chosen_node() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "shop", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "local-path"}, "provisioner": LOCAL_PATH_PROVISIONER,
            "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .unwrap();
        let pv = volume(&claim, &class, "n1").unwrap();
        let v = serde_json::to_value(&pv).unwrap();
        assert_eq!(v["metadata"]["name"], "pvc-u1");
        assert_eq!(
            v["spec"]["hostPath"]["path"],
            "/var/lib/keelson/storage/pvc-u1"
        );
        assert_eq!(v["spec"]["capacity"]["storage"], "1Gi");
        assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(v["spec"]["claimRef"]["uid"], "u1");
        assert_eq!(
            v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
                ["values"][0],
            "n1"
        );
        assert!(keelson_apimachinery::volumes::is_local_path(&pv));
    }
}
