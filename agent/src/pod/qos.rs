//! QoS class (Guaranteed, Burstable, BestEffort) from requests and limits, as the API defines it,
//! and what follows from it on the node: the cgroup parent and the OOM score.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::quantity;

pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut any_set = false;
    let mut guaranteed = true;
    for c in containers {
        let resources = c.resources.clone().unwrap_or_default();
        let requests = resources.requests.unwrap_or_default();
        let limits = resources.limits.unwrap_or_default();
        for name in ["cpu", "memory"] {
            let request = requests.get(name).map(|q| q.0.as_str());
            let limit = limits.get(name).map(|q| q.0.as_str());
            if request.is_some() || limit.is_some() {
                any_set = true;
            }
            // A limit without a request means request = limit.
            let same = match (request, limit) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(r), Some(l)) => quantity::parse_milli(r) == quantity::parse_milli(l),
            };
            guaranteed &= same;
        }
    }
    match (any_set, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The kubelet's oom_score_adj for a container: Guaranteed (and node-critical) pods -997,
/// BestEffort 1000, Burstable by the share of the node's memory the container requests
/// (1000 - 1000 * request / capacity, between 3 and 999), so the kernel's OOM killer picks the
/// pods that asked for least first.
pub fn oom_score_adj(pod: &Pod, c: &Container, memory_capacity: u64) -> i64 {
    const GUARANTEED: i64 = -997;
    const BEST_EFFORT: i64 = 1000;
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    if priority >= NODE_CRITICAL_PRIORITY {
        return GUARANTEED;
    }
    match qos_class(pod) {
        "Guaranteed" => return GUARANTEED,
        "BestEffort" => return BEST_EFFORT,
        _ => {}
    }
    let request = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| quantity::bytes(&q.0))
        .unwrap_or(0);
    let capacity = i128::from(memory_capacity.max(1));
    let adj = 1000 - (1000 * i128::from(request)) / capacity;
    let adj = i64::try_from(adj).unwrap_or(i64::MIN);
    if adj < 1000 + GUARANTEED {
        1000 + GUARANTEED
    } else if adj == BEST_EFFORT {
        BEST_EFFORT - 1
    } else {
        adj
    }
}

/// system-node-critical's priority: such pods are the last the OOM killer takes.
const NODE_CRITICAL_PRIORITY: i32 = 2_000_001_000;

/// The pod's cgroup parent under the agent's cgroup root, by QoS class (cgroupfs syntax).
pub fn cgroup_parent(root: &str, pod: &Pod) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or("unknown");
    let root = root.trim_end_matches('/');
    match qos_class(pod) {
        "Guaranteed" => format!("{root}/pod{uid}"),
        "Burstable" => format!("{root}/burstable/pod{uid}"),
        _ => format!("{root}/besteffort/pod{uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    fn pod(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        Pod {
            metadata: kube::api::ObjectMeta {
                uid: Some("a-b".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: map(requests),
                        limits: map(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn classes_and_cgroup_parents() {
        let best = pod(&[], &[]);
        let burst = pod(&[("cpu", "100m")], &[]);
        let guar = pod(&[], &[("cpu", "1"), ("memory", "64Mi")]);
        assert_eq!(qos_class(&best), "BestEffort");
        assert_eq!(qos_class(&burst), "Burstable");
        assert_eq!(qos_class(&guar), "Guaranteed");
        assert_eq!(
            cgroup_parent("/keelson", &best),
            "/keelson/besteffort/poda-b"
        );
        assert_eq!(cgroup_parent("/keelson/", &guar), "/keelson/poda-b");
    }

    #[test]
    fn oom_score_adj_follows_the_qos_class_and_the_memory_request() {
        const GI: u64 = 1 << 30;
        let c = |p: &Pod| p.spec.as_ref().unwrap().containers[0].clone();
        let best = pod(&[], &[]);
        let guar = pod(&[], &[("cpu", "1"), ("memory", "64Mi")]);
        assert_eq!(oom_score_adj(&best, &c(&best), 4 * GI), 1000);
        assert_eq!(oom_score_adj(&guar, &c(&guar), 4 * GI), -997);
        let quarter = pod(&[("memory", "1Gi")], &[]);
        assert_eq!(oom_score_adj(&quarter, &c(&quarter), 4 * GI), 750);
        // Requesting (nearly) all memory still scores above Guaranteed; nothing, below BestEffort.
        let all = pod(&[("memory", "4Gi")], &[]);
        assert_eq!(oom_score_adj(&all, &c(&all), 4 * GI), 3);
        let cpu_only = pod(&[("cpu", "100m")], &[]);
        assert_eq!(oom_score_adj(&cpu_only, &c(&cpu_only), 4 * GI), 999);
        let mut critical = best.clone();
        critical.spec.as_mut().unwrap().priority = Some(2_000_001_000);
        assert_eq!(oom_score_adj(&critical, &c(&critical), 4 * GI), -997);
    }
}
