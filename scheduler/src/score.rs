//! Scores, 0-100 each, summed: least allocated, spreading Pods of one owner, image locality.

use crate::filter::{allocatable, requests};
use crate::NodeInfo;
use k8s_openapi::api::core::v1::Pod;

fn least_allocated(pod: &Pod, info: &NodeInfo) -> f64 {
    let (cpu, mem) = requests(pod);
    let (uc, um) = info
        .pods
        .iter()
        .map(requests)
        .fold((cpu, mem), |a, b| (a.0 + b.0, a.1 + b.1));
    let free = |used: f64, cap: f64| {
        if cap <= 0.0 {
            0.0
        } else {
            ((cap - used) / cap).clamp(0.0, 1.0)
        }
    };
    (free(uc, allocatable(&info.node, "cpu")) + free(um, allocatable(&info.node, "memory"))) * 50.0
}

fn owner(p: &Pod) -> Option<&str> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Fewer Pods of the same owner on a node scores higher (ties broken by fewer Pods overall).
fn spread(pod: &Pod, info: &NodeInfo) -> f64 {
    let same = match owner(pod) {
        Some(uid) => info.pods.iter().filter(|p| owner(p) == Some(uid)).count(),
        None => 0,
    };
    100.0 / (1.0 + same as f64) - info.pods.len() as f64 * 0.01
}

fn image_locality(pod: &Pod, info: &NodeInfo) -> f64 {
    let images: Vec<&String> = info
        .node
        .status
        .iter()
        .flat_map(|s| s.images.iter().flatten())
        .flat_map(|i| i.names.iter().flatten())
        .collect();
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
        .filter(|c| images.iter().any(|i| i.as_str() == **c))
        .count();
    100.0 * present as f64 / containers.len() as f64 * 0.3
}

pub fn score(pod: &Pod, info: &NodeInfo) -> f64 {
    least_allocated(pod, info) + spread(pod, info) + image_locality(pod, info)
}
