//! What the API server, the controllers and the agent know alike about volumes: the sources a
//! Pod volume and a PersistentVolume may name, and which volumes the built-in local-path
//! provisioner made.

use k8s_openapi::api::core::v1::PersistentVolume;

use crate::well_known::{LOCAL_PATH_PROVISIONER, PROVISIONED_BY_ANNOTATION};

/// The sources a Pod volume may name (exactly one), in the order of upstream's VolumeSource.
pub const POD_VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// The sources a PersistentVolume may name (exactly one), alphabetical.
pub const PERSISTENT_VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// Whether the built-in local-path provisioner made the volume (so its Delete reclaim, and the
/// directory on the node, are Keelson's).
pub fn is_local_path(pv: &PersistentVolume) -> bool {
    pv.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
        .is_some_and(|p| p == LOCAL_PATH_PROVISIONER)
}
