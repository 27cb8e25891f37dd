//! Reads the node's signals (memory from /proc/meminfo and the pods' cgroup, filesystems by
//! statvfs, processes from /proc/loadavg) and what each pod uses (the runtime's container stats,
//! the pods' emptyDirs on disk).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keelson_proto::runtime::v1 as cri;

use super::rank::PodUsage;
use super::statfs::{fs, image_fs};
use super::thresholds::{Observation, Observations, Signal};
use crate::cri::{labels, Cri};
use crate::pod::context::Context;

/// Where the node's signals are read.
#[derive(Clone, Debug)]
pub struct Sources {
    pub root_dir: PathBuf,
    /// The pods' cgroup (`--cgroup-root`), below the memory controller's mount.
    pub cgroup_root: String,
    /// Memory the pods may use (capacity less the reserved), for allocatableMemory.available.
    pub allocatable_memory: Option<u64>,
}

pub async fn node(cri: &dyn Cri, s: &Sources) -> Observations {
    let mut out = Observations::new();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    if let Some(o) = memory_available(&meminfo) {
        out.insert(Signal::MemoryAvailable, o);
    }
    if let Some(capacity) = s.allocatable_memory {
        let used = pods_working_set(&s.cgroup_root);
        let available = capacity.saturating_sub(used);
        out.insert(
            Signal::AllocatableMemoryAvailable,
            Observation {
                available,
                capacity,
            },
        );
    }
    if let Some((bytes, inodes)) = fs(&s.root_dir) {
        out.insert(Signal::NodeFsAvailable, bytes);
        out.insert(Signal::NodeFsInodesFree, inodes);
    }
    if let Some((bytes, inodes)) = image_fs(cri).await {
        out.insert(Signal::ImageFsAvailable, bytes);
        out.insert(Signal::ImageFsInodesFree, inodes);
    }
    if let Some(o) = pids() {
        out.insert(Signal::PidAvailable, o);
    }
    out
}

fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.split(':').next() == Some(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The kubelet's memory.available: capacity less the working set (usage less inactive file
/// pages, which the kernel reclaims first).
pub fn memory_available(meminfo: &str) -> Option<Observation> {
    let total = meminfo_bytes(meminfo, "MemTotal")?;
    let free = meminfo_bytes(meminfo, "MemFree")?;
    let inactive_file = meminfo_bytes(meminfo, "Inactive(file)").unwrap_or(0);
    let working_set = total.saturating_sub(free).saturating_sub(inactive_file);
    Some(Observation {
        available: total.saturating_sub(working_set),
        capacity: total,
    })
}

/// The working set of the pods' cgroup (cgroup v2, or v1's memory controller); 0 before the
/// first pod made it.
fn pods_working_set(cgroup_root: &str) -> u64 {
    let rel = cgroup_root.trim_start_matches('/');
    let v2 = Path::new("/sys/fs/cgroup").join(rel);
    let v1 = Path::new("/sys/fs/cgroup/memory").join(rel);
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    let (usage, stat, inactive_key) = if v1.is_dir() {
        (
            read(v1.join("memory.usage_in_bytes")),
            read(v1.join("memory.stat")),
            "total_inactive_file",
        )
    } else {
        (
            read(v2.join("memory.current")),
            read(v2.join("memory.stat")),
            "inactive_file",
        )
    };
    let usage: u64 = usage.and_then(|u| u.trim().parse().ok()).unwrap_or(0);
    let inactive = stat
        .as_deref()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(inactive_key)?.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    usage.saturating_sub(inactive)
}

/// pid.available: the kernel's pid_max less the tasks that exist.
fn pids() -> Option<Observation> {
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    let tasks: u64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()?;
    Some(Observation {
        available: max.saturating_sub(tasks),
        capacity: max,
    })
}

/// What each running pod of this node uses now, by pod UID.
pub async fn pods(ctx: &Arc<Context>) -> Vec<PodUsage> {
    let filter = cri::ContainerStatsFilter {
        label_selector: [(labels::NODE.to_string(), ctx.settings.node_name.clone())].into(),
        ..Default::default()
    };
    let stats = ctx
        .cri
        .list_container_stats(filter)
        .await
        .unwrap_or_default();
    let mut by_pod: BTreeMap<String, PodUsage> = BTreeMap::new();
    for s in &stats {
        let Some(a) = s.attributes.as_ref() else {
            continue;
        };
        let (Some(uid), Some(name)) = (
            a.labels.get(labels::POD_UID),
            a.labels.get(labels::CONTAINER_NAME),
        ) else {
            continue;
        };
        let Some(pod) = ctx.pod(uid) else { continue };
        let usage = by_pod.entry(uid.clone()).or_insert_with(|| PodUsage {
            pod,
            memory: BTreeMap::new(),
            disk: BTreeMap::new(),
        });
        let memory = s
            .memory
            .as_ref()
            .and_then(|m| m.working_set_bytes.as_ref())
            .map_or(0, |v| v.value);
        let layer = s
            .writable_layer
            .as_ref()
            .and_then(|w| w.used_bytes.as_ref())
            .map_or(0, |v| v.value);
        *usage.memory.entry(name.clone()).or_default() += memory;
        *usage.disk.entry(name.clone()).or_default() += layer;
    }
    for usage in by_pod.values_mut() {
        let volumes = crate::pod::volumes::pod_dir(&ctx.root, &usage.pod).join("volumes");
        let bytes =
            tokio::task::spawn_blocking(move || crate::pod::local_storage::disk_usage(&volumes));
        usage.disk.insert(String::new(), bytes.await.unwrap_or(0));
    }
    by_pod.into_values().collect()
}
