//! The status an object starts with: clients cannot set it on create, and a Pod starts
//! Pending with its QoS class.

use crate::resources::Resource;
use serde_json::{json, Value};

/// Clients cannot set status on create (the Node is the exception: its agent reports it).
pub(super) fn reset_status_on_create(res: &Resource, obj: &mut Value) {
    // A custom object starts without one (its schema may require fields of a status).
    if res.has_status() && keelson_apiserver_registry::custom::definition(res).is_some() {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
        return;
    }
    if res.has_status() && res.kind != "Node" {
        obj["status"] = json!({});
    }
}

/// A new Pod is Pending, with the QoS class its resources give it.
pub(super) fn fill_on_create(res: &Resource, obj: &mut Value) {
    if res.kind == "CustomResourceDefinition" {
        super::custom::definition_status(obj);
    }
    if res.kind == "Pod" {
        let qos = qos_class(obj);
        // Upstream's applySchedulingGatedCondition: a gated Pod says so from the start
        // (kubectl shows SchedulingGated) until the scheduler takes it.
        let gated = obj
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        let status = if gated {
            json!({ "phase": "Pending", "qosClass": qos, "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }]})
        } else {
            json!({ "phase": "Pending", "qosClass": qos })
        };
        crate::object::set_path(obj, &["status"], status);
    }
}

/// The Pod's QoS class from its containers' requests and limits, as upstream computes it.
pub fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in containers {
        let req = c.pointer("/resources/requests");
        let lim = c.pointer("/resources/limits");
        for r in ["cpu", "memory"] {
            let (rq, lm) = (req.and_then(|q| q.get(r)), lim.and_then(|l| l.get(r)));
            any |= rq.is_some() || lm.is_some();
            if lm.is_none() || (rq.is_some() && rq != lm) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        let be = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&be), "BestEffort");
        let g = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(qos_class(&b), "Burstable");
    }
}
