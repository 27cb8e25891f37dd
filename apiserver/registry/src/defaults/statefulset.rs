//! StatefulSet defaults (apps/v1 SetDefaults_StatefulSet with StatefulSetAutoDeletePVC on, as
//! in 1.32): OrderedReady, RollingUpdate with partition 0, claims retained, one replica, ten
//! revisions kept; claim templates get the PersistentVolumeClaim defaults.

use super::pod::pod_template;
use crate::json::{default, each_object_mut, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn stateful_set(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = object_mut(spec, "updateStrategy") {
        if strategy.get("type").is_none_or(Value::is_null) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default(strategy, "rollingUpdate", json!({}));
        }
        let rolling = strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate");
        match strategy
            .get_mut("rollingUpdate")
            .and_then(Value::as_object_mut)
        {
            Some(r) if rolling => default(r, "partition", json!(0)),
            _ => {}
        }
    }
    if let Some(policy) = object_mut(spec, "persistentVolumeClaimRetentionPolicy") {
        default(policy, "whenDeleted", json!("Retain"));
        default(policy, "whenScaled", json!("Retain"));
    }
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    each_object_mut(spec, "volumeClaimTemplates", |claim| {
        if let Some(claim_spec) = object_mut(claim, "spec") {
            default(claim_spec, "volumeMode", json!("Filesystem"));
        }
        if let Some(status) = object_mut(claim, "status") {
            default(status, "phase", json!("Pending"));
        }
    });
    pod_template(spec);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_bare_stateful_set_gets_upstreams_defaults() {
        let mut sts = json!({ "kind": "StatefulSet", "spec": {
            "template": { "spec": { "containers": [{ "name": "c", "image": "i" }] } },
            "volumeClaimTemplates": [{ "metadata": { "name": "data" }, "spec": {} }] } });
        crate::apply_defaults("StatefulSet", &mut sts);
        let spec = &sts["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({ "type": "RollingUpdate", "rollingUpdate": { "partition": 0 } })
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({ "whenDeleted": "Retain", "whenScaled": "Retain" })
        );
        assert_eq!(
            (&spec["replicas"], &spec["revisionHistoryLimit"]),
            (&json!(1), &json!(10))
        );
        assert_eq!(
            spec["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(
            spec["volumeClaimTemplates"][0]["status"]["phase"],
            "Pending"
        );
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        let once = sts.clone();
        crate::apply_defaults("StatefulSet", &mut sts);
        assert_eq!(sts, once, "defaulting twice changes nothing more");
    }

    #[test]
    fn on_delete_gets_no_rolling_update_and_a_set_partition_stays() {
        let mut sts = json!({ "spec": { "updateStrategy": { "type": "OnDelete" } } });
        crate::apply_defaults("StatefulSet", &mut sts);
        assert_eq!(sts["spec"]["updateStrategy"], json!({ "type": "OnDelete" }));
        let mut sts =
            json!({ "spec": { "updateStrategy": { "rollingUpdate": { "partition": 2 } } } });
        crate::apply_defaults("StatefulSet", &mut sts);
        assert_eq!(
            sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            2
        );
    }
}
