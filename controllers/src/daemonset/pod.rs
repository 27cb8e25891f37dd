//! A DaemonSet's Pod for one node, and whether a node should run one. Pure.

use crate::pods::owner_ref;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Toleration};
use keelson_apimachinery::taints::tolerates;
use keelson_apimachinery::well_known::{
    CONTROLLER_REVISION_HASH_LABEL, DISK_PRESSURE_TAINT, MEMORY_PRESSURE_TAINT,
    NETWORK_UNAVAILABLE_TAINT, NOT_READY_TAINT, PID_PRESSURE_TAINT, POD_TEMPLATE_GENERATION_LABEL,
    UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT,
};
use kube::ResourceExt;

/// The template's spec with upstream's automatic DaemonSet tolerations: a daemon stays on a
/// node that is not ready or unreachable (no tolerationSeconds) and runs on nodes under
/// pressure or cordoned; host-network daemons also on nodes whose network is not set up yet.
pub fn spec_with_tolerations(spec: &PodSpec) -> PodSpec {
    let mut spec = spec.clone();
    let mut automatic = vec![
        (NOT_READY_TAINT, "NoExecute"),
        (UNREACHABLE_TAINT, "NoExecute"),
        (DISK_PRESSURE_TAINT, "NoSchedule"),
        (MEMORY_PRESSURE_TAINT, "NoSchedule"),
        (PID_PRESSURE_TAINT, "NoSchedule"),
        (UNSCHEDULABLE_TAINT, "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        automatic.push((NETWORK_UNAVAILABLE_TAINT, "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in automatic {
        let present = tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect));
        if !present {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            });
        }
    }
    spec
}

/// Should `node` run the daemon with `spec` (tolerations already added)? Its nodeSelector
/// matches the node's labels and the pod tolerates every NoSchedule and NoExecute taint.
pub fn should_run(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    let tolerated = taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)));
    selected && tolerated
}

/// The Pod for `node`: the template with the hash and generation labels, owned by the
/// DaemonSet, bound to the node directly (the scheduler has no matchFields node affinity).
pub fn new_pod(ds: &DaemonSet, spec: &PodSpec, hash: &str, node: &str) -> Pod {
    let template = ds.spec.template.clone();
    let mut meta = template.metadata.unwrap_or_default();
    meta.generate_name = Some(format!("{}-", ds.name_any()));
    meta.namespace = ds.namespace();
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
    labels.insert(
        POD_TEMPLATE_GENERATION_LABEL.into(),
        ds.metadata.generation.unwrap_or(1).to_string(),
    );
    meta.owner_references = Some(vec![owner_ref(
        "apps/v1",
        "DaemonSet",
        &ds.name_any(),
        &ds.uid().unwrap_or_default(),
    )]);
    let mut spec = spec.clone();
    spec.node_name = Some(node.into());
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}
