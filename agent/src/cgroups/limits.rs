//! What the kubelet's QoS cgroup manager writes, computed from pods and the node's allocatable:
//! the node-level cgroup (kubepods) holds the pods to allocatable, BestEffort pods share the
//! minimum CPU weight, Burstable ones the sum of their CPU requests, and each pod's cgroup
//! gets its requests as CPU weight and, where every container declares one, its limits.
//! Pure: the files to write come out as (controller, file, value).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

/// cpu.shares bounds and the CFS period, as the kernel and the kubelet use them.
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
pub const CFS_PERIOD_US: i64 = 100_000;
const MIN_QUOTA_US: i64 = 1_000;

/// The limits of one cgroup; None leaves the kernel's default (no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub cpu_shares: Option<u64>,
    /// CFS quota in microseconds per `CFS_PERIOD_US`.
    pub cpu_quota_us: Option<i64>,
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
}

/// Which cgroup hierarchy the machine mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// cpu.shares for `milli` CPUs (the kubelet's MilliCPUToShares).
pub fn shares(milli: i128) -> u64 {
    let shares = milli.max(0) * 1024 / 1000;
    u64::try_from(shares)
        .unwrap_or(MAX_SHARES)
        .clamp(MIN_SHARES, MAX_SHARES)
}

/// The CFS quota for a limit of `milli` CPUs (the kubelet's MilliCPUToQuota).
pub fn quota(milli: i128) -> i64 {
    let q = milli * i128::from(CFS_PERIOD_US) / 1000;
    i64::try_from(q).unwrap_or(i64::MAX).max(MIN_QUOTA_US)
}

/// cgroup v2's cpu.weight for v1 shares, as runc and the kubelet convert them.
pub fn weight(shares: u64) -> u64 {
    1 + (shares.clamp(MIN_SHARES, MAX_SHARES) - 2) * 9999 / 262_142
}

/// The node-level cgroup: CPU weight, memory and PIDs of allocatable (capacity less
/// --kube-reserved and --system-reserved; the eviction threshold is not taken off here).
pub fn node(cpu_milli: i128, memory_bytes: Option<u64>, pids: Option<u64>) -> Limits {
    Limits {
        cpu_shares: Some(shares(cpu_milli)),
        memory_bytes,
        pids,
        ..Limits::default()
    }
}

/// The BestEffort cgroup: the least CPU weight, so they get what the others leave.
pub fn best_effort() -> Limits {
    Limits {
        cpu_shares: Some(MIN_SHARES),
        ..Limits::default()
    }
}

/// The Burstable cgroup: the CPU requests of the Burstable pods together.
pub fn burstable<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Limits {
    let milli = pods
        .into_iter()
        .filter(|p| crate::pod::qos::qos_class(p) == "Burstable")
        .map(|p| pod_amount(p, requests, "cpu").unwrap_or(0))
        .sum();
    Limits {
        cpu_shares: Some(shares(milli)),
        ..Limits::default()
    }
}

/// A pod's own cgroup: requests as CPU weight; the CPU quota and the memory limit only when
/// every container declares that limit (else the pod is not bounded by it).
pub fn pod(pod: &Pod) -> Limits {
    if crate::pod::qos::qos_class(pod) == "BestEffort" {
        return best_effort();
    }
    let declared = |name| all_containers(pod).all(|c| limits(c, name).is_some());
    let cpu_request = pod_amount(pod, requests, "cpu").unwrap_or(0);
    Limits {
        cpu_shares: Some(shares(cpu_request)),
        cpu_quota_us: declared("cpu")
            .then(|| pod_amount(pod, limits, "cpu").map(quota))
            .flatten(),
        memory_bytes: declared("memory")
            .then(|| pod_amount(pod, limits, "memory"))
            .flatten()
            .and_then(|m| u64::try_from(m / 1000).ok()),
        pids: None,
    }
}

/// The files to write for `limits`, as (controller, file, value).
pub fn files(version: Version, limits: &Limits) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    match version {
        Version::V1 => {
            if let Some(s) = limits.cpu_shares {
                out.push(("cpu", "cpu.shares", s.to_string()));
            }
            if let Some(q) = limits.cpu_quota_us {
                out.push(("cpu", "cpu.cfs_period_us", CFS_PERIOD_US.to_string()));
                out.push(("cpu", "cpu.cfs_quota_us", q.to_string()));
            }
            if let Some(m) = limits.memory_bytes {
                out.push(("memory", "memory.limit_in_bytes", m.to_string()));
            }
        }
        Version::V2 => {
            if let Some(s) = limits.cpu_shares {
                out.push(("cpu", "cpu.weight", weight(s).to_string()));
            }
            if let Some(q) = limits.cpu_quota_us {
                out.push(("cpu", "cpu.max", format!("{q} {CFS_PERIOD_US}")));
            }
            if let Some(m) = limits.memory_bytes {
                out.push(("memory", "memory.max", m.to_string()));
            }
        }
    }
    if let Some(p) = limits.pids {
        out.push(("pids", "pids.max", p.to_string()));
    }
    out
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    spec.into_iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
}

type Resources = BTreeMap<String, Quantity>;

/// One container's request or limit of a resource, in millis (millicores, or milli-bytes).
type Side = fn(&Container, &str) -> Option<i128>;

fn requests(c: &Container, name: &str) -> Option<i128> {
    let r = c.resources.as_ref()?;
    // A limit without a request is the request too (as the API server defaults it).
    amount(r.requests.as_ref(), name).or_else(|| amount(r.limits.as_ref(), name))
}

fn limits(c: &Container, name: &str) -> Option<i128> {
    amount(c.resources.as_ref()?.limits.as_ref(), name)
}

fn amount(side: Option<&Resources>, name: &str) -> Option<i128> {
    quantity::parse_milli(&side?.get(name)?.0)
}

/// The pod's amount as upstream's PodRequests/PodLimits: the regular containers and the native
/// sidecars together, or an init container with the sidecars started before it, whichever is
/// more. None when no container sets it.
fn pod_amount(pod: &Pod, side: Side, name: &str) -> Option<i128> {
    let spec = pod.spec.as_ref()?;
    let of = |c: &Container| side(c, name);
    let mut any = false;
    let mut sidecars = 0i128;
    let mut init_peak = 0i128;
    for c in spec.init_containers.iter().flatten() {
        let a = of(c);
        any |= a.is_some();
        let a = a.unwrap_or(0);
        // A native sidecar (KEP-753) keeps running beside what starts after it.
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars += a;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(sidecars + a);
        }
    }
    let regular: i128 = spec.containers.iter().filter_map(of).sum();
    any |= spec.containers.iter().any(|c| of(c).is_some());
    any.then(|| (regular + sidecars).max(init_peak))
}
