//! Admission plugins that change what is created, after the kind's defaults: upstream's
//! DefaultTolerationSeconds here; LimitRanger, Priority and ResourceQuota, which read other
//! objects, in their modules (run by `create`). NodeRestriction, which only refuses, is
//! checked with the authorizers (`node_restriction`).

pub mod limit_ranger;
pub mod node_restriction;
pub mod priority;
pub mod quota;

use crate::object;
use keelson_apimachinery::well_known::{NOT_READY_TAINT, UNREACHABLE_TAINT};
use serde_json::{json, Value};

/// The flags of the admission plugins.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// --default-not-ready-toleration-seconds
    pub not_ready_seconds: i64,
    /// --default-unreachable-toleration-seconds
    pub unreachable_seconds: i64,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            not_ready_seconds: 300,
            unreachable_seconds: 300,
        }
    }
}

impl Admission {
    /// Runs the plugins that apply to a new object of `kind`.
    pub fn on_create(&self, kind: &str, obj: &mut Value) {
        if kind == "Pod" {
            self.default_toleration_seconds(obj);
        }
    }

    /// A Pod that does not already tolerate the not-ready and unreachable NoExecute taints
    /// gets tolerations for them with the default seconds, so a node's outage evicts its pods
    /// after that long instead of at once.
    fn default_toleration_seconds(&self, pod: &mut Value) {
        let current: Vec<Value> = pod
            .pointer("/spec/tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut tolerations = current.clone();
        for (taint, seconds) in [
            (NOT_READY_TAINT, self.not_ready_seconds),
            (UNREACHABLE_TAINT, self.unreachable_seconds),
        ] {
            if !current.iter().any(|t| tolerates(t, taint)) {
                tolerations.push(json!({
                    "key": taint, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }));
            }
        }
        if tolerations.len() != current.len() && pod.get("spec").is_some_and(Value::is_object) {
            object::set_path(pod, &["spec", "tolerations"], json!(tolerations));
        }
    }
}

/// As upstream's plugin decides it: a toleration with this key (or no key) and effect
/// NoExecute (or no effect).
fn tolerates(t: &Value, taint: &str) -> bool {
    let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
    let key = field("key");
    let effect = field("effect");
    (key.is_empty() || key == taint) && (effect.is_empty() || effect == "NoExecute")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(tolerations: Value) -> Vec<Value> {
        let mut pod = json!({"spec": {"containers": [], "tolerations": tolerations}});
        Admission {
            not_ready_seconds: 300,
            unreachable_seconds: 60,
        }
        .on_create("Pod", &mut pod);
        pod["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn adds_both_tolerations_with_their_seconds() {
        let got = admitted(json!(null));
        assert_eq!(
            got,
            vec![
                json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
                json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}),
            ]
        );
    }

    #[test]
    fn keeps_what_the_pod_already_tolerates() {
        let own = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
        let got = admitted(json!([own.clone()]));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], own);
        assert_eq!(got[1]["key"], "node.kubernetes.io/not-ready");
        // Tolerating every taint (no key, no effect) needs nothing more.
        assert_eq!(admitted(json!([{"operator": "Exists"}])).len(), 1);
        // A NoSchedule toleration of the same key does not count.
        let no_schedule = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(admitted(json!([no_schedule])).len(), 3);
        let mut service = json!({"spec": {}});
        Admission::default().on_create("Service", &mut service);
        assert_eq!(service, json!({"spec": {}}));
    }
}
