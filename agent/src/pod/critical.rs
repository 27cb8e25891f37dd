//! Which pods are critical to the node, as the kubelet's IsCriticalPod: admitted under
//! pressure, evicted last, stopped last at a node shutdown. Pure.

use k8s_openapi::api::core::v1::Pod;

use super::static_pods::{is_mirror, SOURCE_ANNOTATION};

/// Priority from which pods are critical (system-cluster-critical and above).
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// A static pod (or its mirror), or one of critical priority.
pub fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let source = annotations.and_then(|a| a.get(SOURCE_ANNOTATION));
    let from_file = source.is_some_and(|s| s != "api");
    from_file
        || is_mirror(pod)
        || pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0) >= CRITICAL_PRIORITY
}
