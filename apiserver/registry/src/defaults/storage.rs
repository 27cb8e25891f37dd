//! Defaults of PersistentVolume, PersistentVolumeClaim and StorageClass, as upstream's
//! SetDefaults_PersistentVolume, _PersistentVolumeClaim and _StorageClass.

use crate::json::{default, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn persistent_volume(obj: &mut Map<String, Value>) {
    if let Some(spec) = object_mut(obj, "spec") {
        default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        default(spec, "volumeMode", json!("Filesystem"));
        if let Some(hp) = spec.get_mut("hostPath").and_then(Value::as_object_mut) {
            default(hp, "type", json!(""));
        }
    }
    if let Some(status) = object_mut(obj, "status") {
        default(status, "phase", json!("Pending"));
    }
}

pub(crate) fn persistent_volume_claim(obj: &mut Map<String, Value>) {
    if let Some(spec) = object_mut(obj, "spec") {
        default(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = object_mut(obj, "status") {
        default(status, "phase", json!("Pending"));
    }
}

pub(crate) fn storage_class(obj: &mut Map<String, Value>) {
    default(obj, "reclaimPolicy", json!("Delete"));
    default(obj, "volumeBindingMode", json!("Immediate"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_claims_and_classes_get_upstreams_defaults() {
        let mut pv = json!({"spec": {"hostPath": {"path": "/d"}}});
        persistent_volume(pv.as_object_mut().unwrap());
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pv["status"]["phase"], "Pending");
        let mut pvc = json!({"spec": {}});
        persistent_volume_claim(pvc.as_object_mut().unwrap());
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"]["phase"], "Pending");
        let mut sc = json!({"provisioner": "p", "reclaimPolicy": "Retain"});
        storage_class(sc.as_object_mut().unwrap());
        assert_eq!(sc["reclaimPolicy"], "Retain");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
    }
}
