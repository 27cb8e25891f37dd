//! Whether a PersistentVolume can serve a PersistentVolumeClaim, as upstream's volume binder
//! matches them (class, access modes, size, volume mode, selector, the node its nodeAffinity
//! admits). Shared by the binder (controllers) and the scheduler's volume binding.

use crate::{node_affinity, quantity, LabelSelector};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec};
use std::collections::BTreeMap;

/// The claim's class ("" when it names none).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

pub fn volume_class(pv: &PersistentVolume) -> &str {
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The bytes the claim requests (0 when it says nothing).
pub fn requested(claim: &PersistentVolumeClaim) -> i64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| quantity::bytes(&q.0))
        .unwrap_or(0)
}

/// The volume's size in bytes (0 when it says nothing).
pub fn capacity(spec: &PersistentVolumeSpec) -> i64 {
    spec.capacity
        .as_ref()
        .and_then(|c| c.get("storage"))
        .and_then(|q| quantity::bytes(&q.0))
        .unwrap_or(0)
}

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map(String::as_str).unwrap_or("Filesystem")
}

/// Whether the volume's nodeAffinity (if any) admits the node.
pub fn admits_node(pv: &PersistentVolume, node: &str, labels: &BTreeMap<String, String>) -> bool {
    let required = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    required.is_none_or(|sel| node_affinity::selects(sel, node, labels))
}

/// Whether `pv` can serve `claim`: same class, every mode the claim asks for, enough room,
/// the same volume mode, the claim's selector matching its labels.
pub fn fits(claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let (Some(cs), Some(ps)) = (claim.spec.as_ref(), pv.spec.as_ref()) else {
        return false;
    };
    let modes = ps.access_modes.as_deref().unwrap_or_default();
    let selected = match &cs.selector {
        None => true,
        Some(sel) => serde_json::to_value(sel)
            .ok()
            .and_then(|v| LabelSelector::from_json(&v).ok())
            .is_some_and(|s| {
                s.matches_map(pv.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
            }),
    };
    claim_class(claim) == volume_class(pv)
        && cs.access_modes.iter().flatten().all(|m| modes.contains(m))
        && capacity(ps) >= requested(claim)
        && volume_mode(cs.volume_mode.as_ref()) == volume_mode(ps.volume_mode.as_ref())
        && selected
}

/// Whether the volume is free for any claim, or pre-bound to this one (claimRef by name).
pub fn available_for(claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    if pv.metadata.deletion_timestamp.is_some() {
        return false;
    }
    match pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
        None => true,
        Some(r) => {
            r.name == claim.metadata.name
                && r.namespace == claim.metadata.namespace
                && r.uid
                    .as_ref()
                    .is_none_or(|u| Some(u) == claim.metadata.uid.as_ref())
        }
    }
}
