//! A StatefulSet's stable identities: the Pod of each ordinal (`<set>-<ordinal>`, hostname and
//! subdomain for its DNS name, the identity labels) and its claims from volumeClaimTemplates
//! (`<template>-<set>-<ordinal>`). Pure.

use crate::pods::owner_ref;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use keelson_apimachinery::well_known::{
    CONTROLLER_REVISION_HASH_LABEL, POD_INDEX_LABEL, STATEFULSET_POD_NAME_LABEL,
};
use kube::ResourceExt;

pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The ordinal in a member's name, None for a pod whose name is not `<set>-<n>`.
pub fn ordinal_of(set: &str, pod: &Pod) -> Option<i32> {
    let name = pod.metadata.name.as_deref()?;
    let n = name.strip_prefix(set)?.strip_prefix('-')?;
    // "web-01" is not ordinal 1's name: only the canonical form counts.
    n.parse::<i32>()
        .ok()
        .filter(|o| *o >= 0 && o.to_string() == n)
}

pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// `.spec.ordinals.start`: the first ordinal (0 unless set).
pub fn start_ordinal(sts: &StatefulSet) -> i32 {
    sts.spec
        .ordinals
        .as_ref()
        .and_then(|o| o.start)
        .unwrap_or(0)
}

fn set_owner(sts: &StatefulSet) -> OwnerReference {
    owner_ref(
        "apps/v1",
        "StatefulSet",
        &sts.name_any(),
        &sts.uid().unwrap_or_default(),
    )
}

/// The Pod of `ordinal`, made from `template` (the template of the revision it belongs to,
/// named `revision`): the identity labels, hostname = its name, subdomain = spec.serviceName
/// (so the headless Service gives it `<pod>.<service>.<ns>.svc`), and each claim template's
/// volume bound to the ordinal's claim.
pub fn new_pod(sts: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let set = sts.name_any();
    let name = pod_name(&set, ordinal);
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.name = Some(name.clone());
    meta.generate_name = None;
    meta.namespace = sts.namespace();
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(STATEFULSET_POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), revision.into());
    meta.owner_references = Some(vec![set_owner(sts)]);
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name);
    spec.subdomain = sts.spec.service_name.clone().filter(|s| !s.is_empty());
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for claim in sts.spec.volume_claim_templates.iter().flatten() {
        let template_name = claim.name_any();
        volumes.retain(|v| v.name != template_name);
        volumes.push(Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&template_name, &set, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    if volumes.is_empty() {
        spec.volumes = None;
    }
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

/// The claims of `ordinal`, one per volumeClaimTemplate, labelled with the selector's
/// matchLabels as upstream. With `whenDeleted: Delete` the StatefulSet owns them (not as
/// controller), so the garbage collector removes them with it; by default (Retain) nothing owns
/// them and they outlive the set and scale-downs.
pub fn claims(sts: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let set = sts.name_any();
    let delete_with_set = sts
        .spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    let selector_labels = sts.spec.selector.match_labels.clone().unwrap_or_default();
    let mut out = Vec::new();
    for template in sts.spec.volume_claim_templates.iter().flatten() {
        let mut claim = template.clone();
        claim.metadata.name = Some(claim_name(&template.name_any(), &set, ordinal));
        claim.metadata.namespace = sts.namespace();
        claim
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .extend(selector_labels.clone());
        claim.metadata.owner_references = delete_with_set.then(|| {
            vec![OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..set_owner(sts)
            }]
        });
        claim.metadata.uid = None;
        claim.metadata.resource_version = None;
        claim.metadata.creation_timestamp = None;
        claim.status = None;
        out.push(claim);
    }
    out
}

/// `persistentVolumeClaimRetentionPolicy.whenScaled` is Delete.
pub fn deletes_claims_on_scale_down(sts: &StatefulSet) -> bool {
    sts.spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_scaled.as_deref())
        == Some("Delete")
}

/// Among `claims` (names), those of ordinals the set no longer runs (outside its range, their
/// pod gone): with `whenScaled: Delete` they go, as upstream deletes the claims of condemned
/// pods once the pods are gone.
pub fn scaled_away_claims(sts: &StatefulSet, claims: &[String], pods: &[Pod]) -> Vec<String> {
    let set = sts.name_any();
    let start = start_ordinal(sts);
    let end = start + sts.spec.replicas.unwrap_or(1).max(0);
    let running: Vec<i32> = pods.iter().filter_map(|p| ordinal_of(&set, p)).collect();
    let templates: Vec<String> = sts
        .spec
        .volume_claim_templates
        .iter()
        .flatten()
        .map(|t| t.name_any())
        .collect();
    claims
        .iter()
        .filter(|name| {
            templates.iter().any(|t| {
                let ordinal = name
                    .strip_prefix(&format!("{t}-{set}-"))
                    .and_then(|n| n.parse::<i32>().ok().filter(|o| o.to_string() == n));
                ordinal.is_some_and(|o| (o < start || o >= end) && !running.contains(&o))
            })
        })
        .cloned()
        .collect()
}
