//! Which pod goes first, and what it is told, as the kubelet's eviction manager ranks them: pods
//! using more than they requested first, then lower priority, then larger use above the request.
//! Critical pods (system priorities) are never evicted. Pure.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::thresholds::{Observation, Signal, Threshold};
use crate::quantity;

/// One running pod and what its containers use now, by container name.
#[derive(Clone, Debug)]
pub struct PodUsage {
    pub pod: Arc<Pod>,
    /// Working set bytes.
    pub memory: BTreeMap<String, u64>,
    /// Writable layer, logs (per container) and the pod's local volumes (under "").
    pub disk: BTreeMap<String, u64>,
}

impl PodUsage {
    fn used(&self, resource: &str) -> u64 {
        self.by_container(resource).values().sum()
    }

    fn by_container(&self, resource: &str) -> &BTreeMap<String, u64> {
        match resource {
            "memory" => &self.memory,
            _ => &self.disk,
        }
    }
}

fn request(c: &Container, resource: &str) -> u64 {
    let q = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource));
    q.and_then(|q| quantity::bytes(&q.0))
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0)
}

fn containers(pod: &Pod) -> &[Container] {
    crate::pod::decide::regular_containers(pod)
}

fn pod_request(pod: &Pod, resource: &str) -> u64 {
    containers(pod).iter().map(|c| request(c, resource)).sum()
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// The pods that may be evicted for `signal`, the first to go first.
pub fn rank(pods: &[PodUsage], signal: Signal) -> Vec<&PodUsage> {
    let resource = match signal.resource() {
        "memory" => "memory",
        _ => "ephemeral-storage",
    };
    let mut ranked: Vec<&PodUsage> = pods
        .iter()
        .filter(|p| !super::admit::is_critical(&p.pod))
        .collect();
    ranked.sort_by_key(|p| {
        let (used, requested) = (p.used(resource), pod_request(&p.pod, resource));
        let above = i128::from(used) - i128::from(requested);
        match signal {
            // Processes are not counted per pod: priority alone.
            Signal::PidAvailable => (false, priority(&p.pod), Reverse(0)),
            _ => (used <= requested, priority(&p.pod), Reverse(above)),
        }
    });
    ranked
}

fn bytes_text(n: u64) -> String {
    quantity::format_milli(i128::from(n) * 1000, true)
}

/// Upstream's eviction message: the resource, the threshold and what was available, and each
/// container using more than it requested.
pub fn message(p: &PodUsage, t: &Threshold, o: &Observation) -> String {
    let resource = t.signal.resource();
    let threshold = match &t.value {
        super::thresholds::Value::Quantity { text, .. } => text.clone(),
        v => bytes_text(v.amount(o.capacity)),
    };
    let mut msg = format!(
        "The node was low on resource: {resource}. Threshold quantity: {threshold}, available: {}. ",
        bytes_text(o.available)
    );
    let key = if resource == "memory" {
        "memory"
    } else {
        "ephemeral-storage"
    };
    if resource == "memory" || resource == "ephemeral-storage" {
        for c in containers(&p.pod) {
            let used = p.by_container(key).get(&c.name).copied().unwrap_or(0);
            let requested = request(c, key);
            if used > requested {
                msg.push_str(&format!(
                    "Container {} was using {}, request is {}, has larger consumption of {resource}. ",
                    c.name,
                    bytes_text(used),
                    bytes_text(requested)
                ));
            }
        }
    }
    msg
}
