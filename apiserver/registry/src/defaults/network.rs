//! networking.k8s.io/v1 defaults (upstream SetDefaults_NetworkPolicy and _NetworkPolicyPort).

use crate::json::{default, each_object_mut, is_unset, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn network_policy(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    // Go's PodSelector is a struct, not a pointer: upstream always stores and returns `{}`.
    default(spec, "podSelector", json!({}));
    for direction in ["ingress", "egress"] {
        each_object_mut(spec, direction, |rule| {
            each_object_mut(rule, "ports", |p| {
                if is_unset(p, "protocol") {
                    p.insert("protocol".into(), json!("TCP"));
                }
            });
        });
    }
    // A policy names Ingress always, and Egress when it has egress rules.
    let no_types = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_types {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}
