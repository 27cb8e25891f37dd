//! Taint eviction (upstream's NoExecute taint manager): a pod on a node with a NoExecute taint
//! it does not tolerate goes at once; one it tolerates for tolerationSeconds goes that long
//! after the taint's timeAdded; a toleration without seconds keeps it. Pure.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;

use keelson_apimachinery::taints::tolerates;

/// When a pod with `tolerations` must leave a node with `taints`; None when it may stay.
/// `added` tells when each taint was put on (its timeAdded, or when we first saw it).
pub fn deadline(
    tolerations: &[Toleration],
    taints: &[Taint],
    added: impl Fn(&Taint) -> Timestamp,
    now: Timestamp,
) -> Option<Timestamp> {
    taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .filter_map(|taint| {
            let matching: Vec<&Toleration> =
                tolerations.iter().filter(|t| tolerates(t, taint)).collect();
            if matching.is_empty() {
                return Some(now);
            }
            // As upstream: the shortest tolerationSeconds wins; only tolerations that all lack
            // seconds tolerate forever. Negative seconds mean at once.
            let seconds = matching.iter().filter_map(|t| t.toleration_seconds).min()?;
            let wait = SignedDuration::from_secs(seconds.max(0));
            Some(added(taint).checked_add(wait).unwrap_or(Timestamp::MAX))
        })
        .min()
}

/// Remembers when this controller first saw taints without timeAdded (set by hand), so that
/// their tolerationSeconds count from somewhere.
#[derive(Default)]
pub struct FirstSeen(HashMap<(String, String), Timestamp>);

impl FirstSeen {
    /// When `taint` on `node` was added: its timeAdded, else when it was first seen here.
    pub fn added(&mut self, node: &str, taint: &Taint, now: Timestamp) -> Timestamp {
        match &taint.time_added {
            Some(t) => t.0,
            None => *self
                .0
                .entry((node.to_string(), taint.key.clone()))
                .or_insert(now),
        }
    }

    /// Forgets taints that are gone.
    pub fn retain(&mut self, present: impl Fn(&str, &str) -> bool) {
        self.0.retain(|(node, key), _| present(node, key));
    }
}

/// The pods to delete now, and the next time another one falls due.
#[derive(Debug, Default, PartialEq)]
pub struct Evictions<'a> {
    pub now: Vec<&'a Pod>,
    pub next: Option<Timestamp>,
}

/// Which of `pods` (all on a node with `taints`) are due for eviction at `now`.
pub fn plan<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    taints: &[Taint],
    added: impl Fn(&Taint) -> Timestamp,
    now: Timestamp,
) -> Evictions<'a> {
    let mut out = Evictions::default();
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        match deadline(tolerations, taints, &added, now) {
            Some(due) if due <= now => out.now.push(pod),
            Some(due) => out.next = Some(out.next.map_or(due, |n| n.min(due))),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
