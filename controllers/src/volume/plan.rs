//! The binder's decisions, pure: which Available PersistentVolume a claim binds to (class,
//! access modes, size, selector, node), the phase a volume is in, the default StorageClass, and
//! whether a claim is still in use by a pod.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
pub use keelson_apimachinery::volume_match::{
    admits_node, available_for, capacity, claim_class, fits, requested, volume_class,
};
use keelson_apimachinery::well_known::DEFAULT_STORAGE_CLASS_ANNOTATION;
use std::collections::BTreeMap;

/// The volume to bind the claim to: one pre-bound to it, else the smallest that fits (as
/// upstream's findBestMatchForClaim). `node`: the node (name, labels) chosen for the claim's
/// first consumer, which the volume must admit.
pub fn best_match<'a>(
    claim: &PersistentVolumeClaim,
    pvs: &'a [PersistentVolume],
    node: Option<(&str, &BTreeMap<String, String>)>,
) -> Option<&'a PersistentVolume> {
    let candidates = pvs.iter().filter(|pv| {
        available_for(claim, pv)
            && fits(claim, pv)
            && node.is_none_or(|(name, labels)| admits_node(pv, name, labels))
    });
    let (prebound, free): (Vec<_>, Vec<_>) =
        candidates.partition(|pv| pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some()));
    prebound.into_iter().next().or_else(|| {
        free.into_iter()
            .min_by_key(|pv| pv.spec.as_ref().map(capacity))
    })
}

/// The class of claims that name none: the newest one annotated as default, as upstream.
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_STORAGE_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true")
        })
        .max_by_key(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// What a volume's claimRef finds.
pub enum ClaimSide<'a> {
    /// No claimRef.
    None,
    /// The claim exists with the referenced uid (or the ref has none yet).
    Present(&'a PersistentVolumeClaim),
    /// The claim was deleted (or re-made with another uid).
    Gone,
}

/// The volume's phase from its claim side.
pub fn volume_phase(pv: &PersistentVolume, claim: &ClaimSide<'_>) -> &'static str {
    let name = pv.metadata.name.as_deref();
    match claim {
        ClaimSide::None => "Available",
        ClaimSide::Present(c) => {
            let bound_to = c.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if bound_to.is_some() && bound_to == name {
                "Bound"
            } else {
                "Available"
            }
        }
        ClaimSide::Gone => "Released",
    }
}

/// Whether a pod that has not finished uses the claim (pvc-protection keeps the claim then).
pub fn in_use(claim: &PersistentVolumeClaim, pods: &[Pod]) -> bool {
    let name = claim.metadata.name.as_deref().unwrap_or("");
    pods.iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .flat_map(|p| p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
        .any(|v| {
            v.persistent_volume_claim
                .as_ref()
                .is_some_and(|c| c.claim_name == name)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(size: &str, modes: &[&str], class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "default", "uid": "c1"},
            "spec": {"accessModes": modes, "storageClassName": class,
                "resources": {"requests": {"storage": size}}}
        }))
        .unwrap()
    }

    fn pv(name: &str, size: &str, modes: &[&str], class: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"tier": name}},
            "spec": {"capacity": {"storage": size}, "accessModes": modes,
                "storageClassName": class, "hostPath": {"path": "/tmp"}}
        }))
        .unwrap()
    }

    #[test]
    fn the_smallest_volume_that_fits_is_chosen() {
        let pvs = vec![
            pv("big", "10Gi", &["ReadWriteOnce"], "slow"),
            pv("small", "1Gi", &["ReadWriteOnce"], "slow"),
            pv("tiny", "100Mi", &["ReadWriteOnce"], "slow"),
            pv("other-class", "1Gi", &["ReadWriteOnce"], "fast"),
            pv("read-only", "1Gi", &["ReadOnlyMany"], "slow"),
        ];
        let c = claim("500Mi", &["ReadWriteOnce"], "slow");
        let got = best_match(&c, &pvs, None).map(|p| p.metadata.name.clone().unwrap());
        assert_eq!(got.as_deref(), Some("small"));
        assert!(best_match(&claim("20Gi", &["ReadWriteOnce"], "slow"), &pvs, None).is_none());
        let mut picky = c.clone();
        picky.spec.as_mut().unwrap().selector =
            Some(serde_json::from_value(json!({"matchLabels": {"tier": "big"}})).unwrap());
        let got = best_match(&picky, &pvs, None).map(|p| p.metadata.name.clone().unwrap());
        assert_eq!(got.as_deref(), Some("big"));
    }

    #[test]
    fn bound_and_node_bound_volumes_are_skipped() {
        let mut taken = pv("taken", "1Gi", &["ReadWriteOnce"], "");
        taken.spec.as_mut().unwrap().claim_ref =
            Some(serde_json::from_value(json!({"namespace": "default", "name": "other"})).unwrap());
        let mut on_n2 = pv("on-n2", "1Gi", &["ReadWriteOnce"], "");
        on_n2.spec.as_mut().unwrap().node_affinity = Some(
            serde_json::from_value(
                json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}),
            )
            .unwrap(),
        );
        let pvs = vec![taken, on_n2];
        let c = claim("1Gi", &["ReadWriteOnce"], "");
        let n1 = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
        assert!(best_match(&c, &pvs, Some(("n1", &n1))).is_none());
        let n2 = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n2".to_string())]);
        assert!(best_match(&c, &pvs, Some(("n2", &n2))).is_some());
    }

    #[test]
    fn phases_follow_the_claim() {
        let v = pv("v", "1Gi", &["ReadWriteOnce"], "");
        let mut c = claim("1Gi", &["ReadWriteOnce"], "");
        assert_eq!(volume_phase(&v, &ClaimSide::None), "Available");
        assert_eq!(volume_phase(&v, &ClaimSide::Present(&c)), "Available");
        c.spec.as_mut().unwrap().volume_name = Some("v".into());
        assert_eq!(volume_phase(&v, &ClaimSide::Present(&c)), "Bound");
        assert_eq!(volume_phase(&v, &ClaimSide::Gone), "Released");
    }

    #[test]
    fn a_claim_is_in_use_until_its_pods_finish() {
        let c = claim("1Gi", &["ReadWriteOnce"], "");
        let pod = |phase: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
                "status": {"phase": phase}}))
            .unwrap()
        };
        assert!(in_use(&c, &[pod("Running")]));
        assert!(!in_use(&c, &[pod("Succeeded")]));
        assert!(!in_use(&c, &[]));
    }
}
