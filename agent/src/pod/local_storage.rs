//! A pod's local storage against its limits, as the kubelet's eviction manager checks it
//! (localStorageEviction): an emptyDir past its `sizeLimit`, the pod past the sum of its
//! containers' `ephemeral-storage` limits, a container past its own. A pod over any of them is
//! evicted (Failed, reason Evicted, upstream's message). The rules are pure; `measure` reads the
//! node (the emptyDirs' blocks on disk, each container's writable layer and logs).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::security::Rejection;
use crate::quantity;

/// What the pod uses on the node's disk, in bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Disk-backed emptyDir volumes, by volume name.
    pub empty_dirs: BTreeMap<String, u64>,
    /// Each container's writable layer and logs, by container name.
    pub containers: BTreeMap<String, u64>,
}

pub const EVICTED: &str = "Evicted";

/// Whether the pod sets any limit this check enforces (pods without one are never measured).
pub fn has_limits(pod: &Pod) -> bool {
    !empty_dir_limits(pod).is_empty() || all_containers(pod).any(|c| limit(c).is_some())
}

/// The first limit the pod is over, as the kubelet orders them: emptyDirs, the pod, then each
/// container.
pub fn check(pod: &Pod, usage: &Usage) -> Option<Rejection> {
    let evicted = |message: String| Rejection {
        reason: EVICTED,
        message,
    };
    for (name, (bytes, text)) in empty_dir_limits(pod) {
        if usage.empty_dirs.get(&name).is_some_and(|&u| u > bytes) {
            return Some(evicted(format!(
                "Usage of EmptyDir volume {name:?} exceeds the limit {text:?}. "
            )));
        }
    }
    let limits: Vec<(&Container, u64, &str)> = all_containers(pod)
        .filter_map(|c| limit(c).map(|(b, t)| (c, b, t)))
        .collect();
    let pod_limit: u64 = limits.iter().map(|(_, b, _)| b).sum();
    let pod_used: u64 =
        usage.empty_dirs.values().sum::<u64>() + usage.containers.values().sum::<u64>();
    if pod_limit > 0 && pod_used > pod_limit {
        return Some(evicted(format!(
            "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
            quantity::format_milli(i128::from(pod_limit) * 1000, true)
        )));
    }
    limits.into_iter().find_map(|(c, bytes, text)| {
        let used = usage.containers.get(&c.name).copied().unwrap_or(0);
        (used > bytes).then(|| {
            evicted(format!(
                "Container {} exceeded its local ephemeral storage limit {text:?}. ",
                c.name
            ))
        })
    })
}

/// The end the node gave a pod that its status already records (an eviction, a node
/// shutdown): such a pod stays ended, also across an agent restart or a reboot (an evicted
/// pod's usage drops once its containers stop).
pub fn recorded(pod: &Pod) -> Option<Rejection> {
    let status = pod.status.as_ref()?;
    let reason = [EVICTED, crate::shutdown::plan::REASON]
        .into_iter()
        .find(|&r| status.reason.as_deref() == Some(r))?;
    (status.phase.as_deref() == Some("Failed")).then(|| Rejection {
        reason,
        message: status.message.clone().unwrap_or_default(),
    })
}

/// Disk-backed emptyDirs with a sizeLimit: name -> (bytes, the limit as written). A Memory
/// emptyDir is a tmpfs of that size, which the kernel holds to it.
fn empty_dir_limits(pod: &Pod) -> BTreeMap<String, (u64, String)> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    volumes
        .unwrap_or_default()
        .iter()
        .filter_map(|v| {
            let e = v.empty_dir.as_ref()?;
            if e.medium.as_deref().is_some_and(|m| !m.is_empty()) {
                return None;
            }
            let text = &e.size_limit.as_ref()?.0;
            let bytes = u64::try_from(quantity::bytes(text)?)
                .ok()
                .filter(|&b| b > 0)?;
            Some((v.name.clone(), (bytes, text.clone())))
        })
        .collect()
}

fn limit(c: &Container) -> Option<(u64, &str)> {
    let q = c
        .resources
        .as_ref()?
        .limits
        .as_ref()?
        .get("ephemeral-storage")?;
    let bytes = u64::try_from(quantity::bytes(&q.0)?)
        .ok()
        .filter(|&b| b > 0)?;
    Some((bytes, q.0.as_str()))
}

/// Init and regular containers: those whose limits make the pod's (ephemeral ones have none).
fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    super::decide::init_containers(pod)
        .iter()
        .chain(super::decide::regular_containers(pod))
}

/// The blocks a directory tree holds on its own filesystem (as `du -s`; other mounts below it
/// are not counted, hard links once).
pub fn disk_usage(dir: &Path) -> u64 {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(m) = entry.metadata() else { continue };
            if m.dev() != top.dev() || (m.nlink() > 1 && !seen.insert(m.ino())) {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
#[path = "local_storage_tests.rs"]
mod tests;
