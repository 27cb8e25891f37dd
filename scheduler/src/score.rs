//! Scores, 0-100 each, summed: least allocated, spreading Pods of one owner, image locality.

use crate::node_info::{owner, NodeInfo};
use k8s_openapi::api::core::v1::Pod;

fn least_allocated((cpu, mem): (f64, f64), info: &NodeInfo) -> f64 {
    let (cap_cpu, cap_mem, _) = info.allocatable;
    let free = |used: f64, cap: f64| {
        if cap <= 0.0 {
            0.0
        } else {
            ((cap - used) / cap).clamp(0.0, 1.0)
        }
    };
    (free(info.requested.0 + cpu, cap_cpu) + free(info.requested.1 + mem, cap_mem)) * 50.0
}

/// Fewer Pods of the same owner on a node scores higher (ties broken by fewer Pods overall).
fn spread(pod: &Pod, info: &NodeInfo) -> f64 {
    let same = owner(pod)
        .and_then(|uid| info.owners.get(uid))
        .copied()
        .unwrap_or(0);
    100.0 / (1.0 + same as f64) - info.pods as f64 * 0.01
}

fn image_locality(pod: &Pod, info: &NodeInfo) -> f64 {
    let containers: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| c.image.as_deref())
        .collect();
    if containers.is_empty() {
        return 0.0;
    }
    let present = containers
        .iter()
        .filter(|c| info.images.contains(**c))
        .count();
    100.0 * present as f64 / containers.len() as f64 * 0.3
}

/// `requests` is the Pod's own, as for `filter::unfit`.
pub fn score(pod: &Pod, requests: (f64, f64), info: &NodeInfo) -> f64 {
    least_allocated(requests, info) + spread(pod, info) + image_locality(pod, info)
}
