//! Taints and tolerations: whether a toleration matches a taint, as upstream's
//! `Toleration.ToleratesTaint` (k8s.io/api/core/v1) decides it for the scheduler, the taint
//! eviction of node lifecycle and the DaemonSet controller alike.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Does `toleration` tolerate `taint`? An empty effect matches every effect and an empty key
/// every key (validation allows that only with Exists). Exists ignores the value; Equal, the
/// default, compares it (no value is the empty value). An operator upstream does not know
/// tolerates nothing.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(String::from),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(json: serde_json::Value) -> Toleration {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn toleration_matching_follows_upstream() {
        let all = toleration(serde_json::json!({ "operator": "Exists" }));
        assert!(
            tolerates(&all, &taint("anything", Some("v"), "NoExecute")),
            "empty key with Exists tolerates all"
        );
        let t = toleration(
            serde_json::json!({ "key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule" }),
        );
        assert!(
            !tolerates(&t, &taint("gpu", None, "NoSchedule")),
            "value differs"
        );
        assert!(tolerates(&t, &taint("gpu", Some("yes"), "NoSchedule")));
        assert!(
            !tolerates(&t, &taint("gpu", Some("yes"), "NoExecute")),
            "effect differs"
        );
        assert!(
            !tolerates(&t, &taint("fpga", Some("yes"), "NoSchedule")),
            "key differs"
        );
    }

    #[test]
    fn equal_is_the_default_and_no_value_is_the_empty_one() {
        let t = toleration(serde_json::json!({ "key": "dedicated" }));
        assert!(tolerates(&t, &taint("dedicated", None, "NoSchedule")));
        assert!(
            tolerates(&t, &taint("dedicated", Some(""), "NoExecute")),
            "any effect"
        );
        assert!(!tolerates(
            &t,
            &taint("dedicated", Some("db"), "NoSchedule")
        ));
        let exists = toleration(serde_json::json!({ "key": "dedicated", "operator": "Exists" }));
        assert!(tolerates(
            &exists,
            &taint("dedicated", Some("db"), "NoSchedule")
        ));
    }

    #[test]
    fn an_unknown_operator_tolerates_nothing() {
        let t = toleration(serde_json::json!({ "key": "k", "operator": "Lt", "value": "v" }));
        assert!(!tolerates(&t, &taint("k", Some("v"), "NoSchedule")));
    }
}
