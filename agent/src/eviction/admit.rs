//! The eviction manager's admission of a new pod under pressure, as the kubelet's: critical
//! pods always; under memory pressure alone, pods that are not BestEffort or that tolerate the
//! memory-pressure taint; under any other pressure, no other pod. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use keelson_apimachinery::well_known::MEMORY_PRESSURE_TAINT;

pub use crate::pod::critical::is_critical;
use crate::pod::local_storage::EVICTED;
use crate::pod::security::Rejection;

fn tolerates_memory_pressure(pod: &Pod) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref());
    tolerations.unwrap_or_default().iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        let exists = t.operator.as_deref() == Some("Exists");
        let key_ok = match t.key.as_deref() {
            None | Some("") => exists,
            Some(k) => {
                k == MEMORY_PRESSURE_TAINT
                    && (exists || t.value.as_deref().unwrap_or("").is_empty())
            }
        };
        effect_ok && key_ok
    })
}

pub fn admit(pod: &Pod, conditions: &BTreeSet<&'static str>) -> Result<(), Rejection> {
    if conditions.is_empty() || is_critical(pod) {
        return Ok(());
    }
    let memory_only = conditions.len() == 1 && conditions.contains("MemoryPressure");
    if memory_only
        && (crate::pod::qos::qos_class(pod) != "BestEffort" || tolerates_memory_pressure(pod))
    {
        return Ok(());
    }
    let list: Vec<&str> = conditions.iter().copied().collect();
    Err(Rejection {
        reason: EVICTED,
        message: format!("The node had condition: [{}]. ", list.join(" ")),
    })
}
