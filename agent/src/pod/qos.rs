//! QoS class (Guaranteed, Burstable, BestEffort) from requests and limits, as the API defines it.

use k8s_openapi::api::core::v1::Pod;

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
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
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
}
