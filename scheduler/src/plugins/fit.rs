//! NodeResourcesFit (the filter, every resource the Pod requests, extended ones included; the
//! LeastAllocated or MostAllocated score), NodeResourcesBalancedAllocation and ImageLocality,
//! with upstream's integer arithmetic.

use super::Reject;
use crate::node_info::{NodeInfo, PodInfo};
use std::borrow::Cow;
use std::collections::HashMap;

pub const TOO_MANY_PODS: &str = "Too many pods";

/// Upstream's fitsRequest: every resource that does not fit is a reason of its own.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Reject> {
    let mut reasons: Vec<Cow<'static, str>> = Vec::new();
    // A node that reports no pod count is not limited (upstream would refuse every Pod).
    if node.allowed_pods > 0 && node.pods.len() as i64 + 1 > node.allowed_pods {
        reasons.push(TOO_MANY_PODS.into());
    }
    let (req, alloc, used) = (&pod.requests, &node.allocatable, &node.requested);
    for (want, free, why) in [
        (
            req.milli_cpu,
            alloc.milli_cpu - used.milli_cpu,
            "Insufficient cpu",
        ),
        (
            req.memory,
            alloc.memory - used.memory,
            "Insufficient memory",
        ),
        (
            req.ephemeral_storage,
            alloc.ephemeral_storage - used.ephemeral_storage,
            "Insufficient ephemeral-storage",
        ),
    ] {
        if want > 0 && want > free {
            reasons.push(Cow::Borrowed(why));
        }
    }
    for (name, want) in &req.scalar {
        if *want > 0 && *want > alloc.get(name) - used.get(name) {
            reasons.push(format!("Insufficient {name}").into());
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Reject {
            reasons,
            resolvable: true,
        })
    }
}

/// NodeResourcesFit's scoring strategy (NodeResourcesFitArgs.scoringStrategy).
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    pub most_allocated: bool,
    /// Resources and their weights; upstream's default is cpu 1, memory 1.
    pub resources: Vec<(String, i64)>,
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy {
            most_allocated: false,
            resources: vec![("cpu".into(), 1), ("memory".into(), 1)],
        }
    }
}

/// What the node would have requested with the Pod on it: cpu and memory with upstream's
/// non-zero defaults (the fit score), or as requested (the balanced score).
fn requested_with(pod: &PodInfo, node: &NodeInfo, name: &str, non_zero: bool) -> i64 {
    match (name, non_zero) {
        ("cpu", true) => node.non_zero_requested.0 + pod.non_zero.0,
        ("memory", true) => node.non_zero_requested.1 + pod.non_zero.1,
        _ => node.requested.get(name) + pod.requests.get(name),
    }
}

pub fn score(strategy: &Strategy, pod: &PodInfo, node: &NodeInfo) -> i64 {
    let (mut sum, mut weights) = (0, 0);
    for (name, weight) in &strategy.resources {
        let cap = node.allocatable.get(name);
        if cap == 0 {
            continue;
        }
        let used = requested_with(pod, node, name, true);
        let s = if strategy.most_allocated {
            used.min(cap) * 100 / cap
        } else if used > cap {
            0
        } else {
            (cap - used) * 100 / cap
        };
        sum += s * weight;
        weights += weight;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// NodeResourcesBalancedAllocation: 100 when cpu and memory would be used in the same
/// proportion, less by their standard deviation. None for a Pod that requests nothing
/// (upstream skips best-effort Pods).
pub fn balanced(pod: &PodInfo, node: &NodeInfo) -> Option<i64> {
    if pod.requests.milli_cpu == 0 && pod.requests.memory == 0 {
        return None;
    }
    let fractions: Vec<f64> = ["cpu", "memory"]
        .iter()
        .filter(|r| node.allocatable.get(r) > 0)
        .map(|r| {
            let f = requested_with(pod, node, r, false) as f64 / node.allocatable.get(r) as f64;
            f.min(1.0)
        })
        .collect();
    let std = match fractions.as_slice() {
        [a, b] => ((a - b) / 2.0).abs(),
        _ => 0.0,
    };
    Some(((1.0 - std) * 100.0) as i64)
}

/// ImageLocality's cluster-wide view: per image name, its size and on how many nodes it is.
#[derive(Default)]
pub struct Images {
    spread: HashMap<String, (i64, usize)>,
    nodes: usize,
}

impl Images {
    pub fn new(nodes: &[NodeInfo]) -> Images {
        let mut spread: HashMap<String, (i64, usize)> = HashMap::new();
        for n in nodes {
            let images = n.node.status.iter().flat_map(|s| s.images.iter().flatten());
            for image in images {
                for name in image.names.iter().flatten() {
                    let e = spread.entry(name.clone()).or_default();
                    e.0 = image.size_bytes.unwrap_or(0);
                    e.1 += 1;
                }
            }
        }
        Images {
            spread,
            nodes: nodes.len(),
        }
    }

    /// The Pod's images as ImageLocality weighs them, found once per cycle.
    pub fn of(&self, pod: &PodInfo) -> PodImages {
        let spec = pod.pod.spec.as_ref();
        let containers = spec
            .into_iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
        let count = containers.clone().count();
        // Each image's size scaled by the share of nodes that have it.
        let present = containers
            .filter_map(|c| c.image.as_deref())
            .filter_map(|image| {
                let name = normalized_image(image).into_owned();
                let (size, nodes) = self.spread.get(&name)?;
                let scaled = (*size as f64 * (*nodes as f64 / self.nodes.max(1) as f64)) as i64;
                Some((name, scaled))
            })
            .collect();
        PodImages { present, count }
    }
}

/// A Pod's images that some node has, with their scaled sizes.
pub struct PodImages {
    present: Vec<(String, i64)>,
    count: usize,
}

impl PodImages {
    /// Upstream's ImageLocality: the scaled sizes of the Pod's images already on the node,
    /// mapped from 23 MB..1000 MB per container onto 0..100.
    pub fn score(&self, node: &NodeInfo) -> i64 {
        const MB: i64 = 1024 * 1024;
        const MIN: i64 = 23 * MB;
        const MAX_PER_CONTAINER: i64 = 1000 * MB;
        if self.present.is_empty() {
            return 0;
        }
        let on_node = |name: &str| {
            node.node
                .status
                .iter()
                .flat_map(|s| s.images.iter().flatten())
                .any(|i| i.names.iter().flatten().any(|n| n == name))
        };
        let sum: i64 = self
            .present
            .iter()
            .filter(|(name, _)| on_node(name))
            .map(|(_, scaled)| scaled)
            .sum();
        let max = MAX_PER_CONTAINER * self.count as i64;
        let clamped = sum.clamp(MIN, max.max(MIN + 1));
        100 * (clamped - MIN) / (max - MIN).max(1)
    }
}

/// An image reference with `:latest` when it names no tag, as upstream compares them.
fn normalized_image(image: &str) -> Cow<'_, str> {
    if image.rfind(':').unwrap_or(0) <= image.rfind('/').unwrap_or(0) && !image.contains('@') {
        Cow::Owned(format!("{image}:latest"))
    } else {
        Cow::Borrowed(image)
    }
}
