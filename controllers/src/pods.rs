//! What controllers ask of Pods: active, ready, owned by whom.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

/// Counts toward a ReplicaSet's replicas: not being deleted and not finished.
pub fn is_active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Ready for at least `min_ready_seconds` at `now` (upstream's IsPodAvailable): the Ready
/// condition's last transition is that old.
pub fn is_available(p: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(p) || min_ready_seconds <= 0 {
        return is_ready(p);
    }
    let since = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    since.is_some_and(|t| {
        t.checked_add(SignedDuration::from_secs(min_ready_seconds.into()))
            .is_ok_and(|due| due <= now)
    })
}

pub fn controller_of<K: ResourceExt>(obj: &K) -> Option<&OwnerReference> {
    obj.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
}

pub fn is_controlled_by<K: ResourceExt>(obj: &K, owner_uid: &str) -> bool {
    controller_of(obj).is_some_and(|o| o.uid == owner_uid)
}

/// The ownerReference a controller puts on what it creates.
pub fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
pub fn pod(name: &str, ready: bool, phase: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": phase, "podIP": format!("10.244.0.{}", name.len()),
            "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
    }))
    .unwrap()
}
