//! What the Job controller reads from its pods and puts on new ones. Pure.

use crate::pods::owner_ref;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::jiff::Timestamp;
use keelson_apimachinery::well_known::{JOB_COMPLETION_INDEX, JOB_TRACKING_FINALIZER};
use kube::ResourceExt;
use std::collections::BTreeSet;

/// The variable an Indexed Job's containers read their index from (as upstream).
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn has_tracking_finalizer(p: &Pod) -> bool {
    p.finalizers().iter().any(|f| f == JOB_TRACKING_FINALIZER)
}

/// Succeeded, failed, or still running. As upstream (podReplacementPolicy
/// TerminatingOrFailed): a pod deleted before it succeeded is a failure, unless a
/// podFailurePolicy is set, which needs the pod's final state and so waits for phase Failed.
pub fn outcome(p: &Pod, job: &Job) -> Option<bool> {
    match phase(p) {
        "Succeeded" => Some(true),
        "Failed" => Some(false),
        _ if p.metadata.deletion_timestamp.is_some()
            && job
                .spec
                .as_ref()
                .and_then(|s| s.pod_failure_policy.as_ref())
                .is_none() =>
        {
            Some(false)
        }
        _ => None,
    }
}

/// Being deleted but not yet finished (status.terminating).
pub fn is_terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some() && !matches!(phase(p), "Succeeded" | "Failed")
}

/// The pod's completion index, if it has a valid one.
pub fn index(p: &Pod) -> Option<i32> {
    p.annotations()
        .get(JOB_COMPLETION_INDEX)
        .or_else(|| p.labels().get(JOB_COMPLETION_INDEX))
        .and_then(|i| i.parse().ok())
        .filter(|i: &i32| *i >= 0)
}

/// When the pod ended: its last container's finish time, else when it was created.
pub fn finish_time(p: &Pod) -> Option<Timestamp> {
    let status = p.status.as_ref();
    let containers = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten();
    let finished = containers
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    finished.or_else(|| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// "0-2,4,7-8" (status.completedIndexes) from a set of indexes.
pub fn format_indexes(set: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        out.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
    }
    out.join(",")
}

/// The set `format_indexes` wrote; malformed parts are skipped.
pub fn parse_indexes(text: &str) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            set.extend(a..=b);
        }
    }
    set
}

/// A new pod from the Job's template: owned by the Job, holding the job-tracking finalizer,
/// and for Indexed Jobs carrying its index (annotation, label, JOB_COMPLETION_INDEX, and the
/// hostname `<job>-<index>` as upstream).
pub fn new_pod(job: &Job, index: Option<i32>) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut meta = template.metadata.unwrap_or_default();
    let name = job.name_any();
    meta.generate_name = Some(match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    });
    meta.namespace = job.namespace();
    meta.finalizers = Some(vec![JOB_TRACKING_FINALIZER.into()]);
    meta.owner_references = Some(vec![owner_ref(
        "batch/v1",
        "Job",
        &name,
        &job.uid().unwrap_or_default(),
    )]);
    let mut spec = template.spec.unwrap_or_default();
    if let Some(i) = index {
        let text = i.to_string();
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(JOB_COMPLETION_INDEX.into(), text.clone());
        meta.labels
            .get_or_insert_with(Default::default)
            .insert(JOB_COMPLETION_INDEX.into(), text);
        let env = EnvVar {
            name: COMPLETION_INDEX_ENV.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{JOB_COMPLETION_INDEX}']"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let containers = spec.init_containers.iter_mut().flatten();
        for c in containers.chain(spec.containers.iter_mut()) {
            c.env.get_or_insert_with(Vec::new).push(env.clone());
        }
        if spec.hostname.is_none() {
            spec.hostname = Some(format!("{name}-{i}"));
        }
    }
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_sets_print_as_ranges_and_read_back() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 7, 8].into();
        assert_eq!(format_indexes(&set), "0-2,4,7-8");
        assert_eq!(parse_indexes("0-2,4,7-8"), set);
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }
}
