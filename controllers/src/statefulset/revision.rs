//! ControllerRevisions as upstream's StatefulSet controller keeps them: each pod template the
//! set has had is one revision whose data is the patch `{"spec":{"template":{...,"$patch":
//! "replace"}}}` (what `kubectl rollout undo` applies), named `<set>-<hash>`, numbered in the
//! order the templates were last used. Pure.

use crate::pods::owner_ref;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use keelson_apimachinery::hash::fnv1a_32;
use keelson_apimachinery::well_known::{CONTROLLER_HASH_LABEL, CONTROLLER_REVISION_HASH_LABEL};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The revision data of `sts`'s current template.
pub fn patch(sts: &StatefulSet) -> Value {
    let mut template = serde_json::to_value(&sts.spec.template).unwrap_or_else(|_| json!({}));
    if let Some(t) = template.as_object_mut() {
        t.insert("$patch".into(), json!("replace"));
    }
    json!({ "spec": { "template": template } })
}

/// The pod template a revision holds (its data without the patch directive).
pub fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = rev.data.0.get("spec")?.get("template")?.clone();
    template.as_object_mut()?.remove("$patch");
    serde_json::from_value(template).ok()
}

/// Upstream's hash: FNV-1a over the data then the collision count, its decimal digits written
/// in the alphabet names use.
pub fn hash(data: &Value, collision_count: i32) -> String {
    let mut bytes = serde_json::to_vec(data).unwrap_or_default();
    if collision_count > 0 {
        bytes.extend(collision_count.to_string().bytes());
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    fnv1a_32(&bytes)
        .to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// The revision `number` of `sts`'s current template: labelled as the pod template (so the
/// set's selector finds it, as `kubectl rollout history` looks for it) and with the set's
/// annotations (its change-cause among them).
pub fn new_revision(sts: &StatefulSet, number: i64, collision_count: i32) -> ControllerRevision {
    let data = patch(sts);
    let hash = hash(&data, collision_count);
    let mut labels = sts
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(CONTROLLER_HASH_LABEL.into(), hash.clone());
    let mut rev = ControllerRevision {
        data: RawExtension(data),
        revision: Some(number),
        ..Default::default()
    };
    let meta = &mut rev.metadata;
    meta.name = Some(format!("{}-{hash}", sts.name_any()));
    meta.namespace = sts.namespace();
    meta.labels = Some(labels);
    meta.annotations = sts.metadata.annotations.clone();
    meta.owner_references = Some(vec![owner_ref(
        "apps/v1",
        "StatefulSet",
        &sts.name_any(),
        &sts.uid().unwrap_or_default(),
    )]);
    rev
}

/// A revision's number (0 when unset).
pub fn number(rev: &ControllerRevision) -> i64 {
    rev.revision.unwrap_or(0)
}

/// Same template: the data compared as JSON, so key order and formatting do not matter.
pub fn same_data(a: &ControllerRevision, data: &Value) -> bool {
    &a.data.0 == data
}

/// What to do about the revisions of `sts` among `revisions` (those it controls).
#[derive(Debug, Default, PartialEq)]
pub struct Revisions {
    /// The revision of the current template, when one exists already.
    pub update: Option<ControllerRevision>,
    /// An existing revision that holds the template again (a rollback) and must become the
    /// newest: its new number.
    pub renumber: Option<(String, i64)>,
    /// The number a new revision gets.
    pub next: i64,
}

/// Finds the update revision of `sts`: an existing one with the same data (renumbered past the
/// others when it is not the newest, as upstream), or the number a new one takes.
pub fn choose(sts: &StatefulSet, revisions: &[ControllerRevision]) -> Revisions {
    let data = patch(sts);
    let max = revisions.iter().map(number).max().unwrap_or(0);
    let equal = revisions
        .iter()
        .filter(|r| same_data(r, &data))
        .max_by_key(|r| number(r));
    match equal {
        Some(r) if number(r) < max => Revisions {
            update: Some(r.clone()),
            renumber: Some((r.name_any(), max + 1)),
            next: max + 1,
        },
        Some(r) => Revisions {
            update: Some(r.clone()),
            renumber: None,
            next: max + 1,
        },
        None => Revisions {
            update: None,
            renumber: None,
            next: max + 1,
        },
    }
}

/// The revisions `revisionHistoryLimit` lets go: not the current or update revision, not one
/// a live pod was made from; the oldest first, keeping `limit` of them.
pub fn prune(
    revisions: &[ControllerRevision],
    pods: &[Pod],
    keep: &[&str],
    limit: i32,
) -> Vec<String> {
    let live: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.labels().get(CONTROLLER_REVISION_HASH_LABEL))
        .map(String::as_str)
        .chain(keep.iter().copied())
        .collect();
    let mut old: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or("")))
        .collect();
    old.sort_by_key(|r| number(r));
    let excess = old
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    old.iter().take(excess).map(|r| r.name_any()).collect()
}
