//! Deployment, ReplicaSet and DaemonSet defaults (apps/v1 SetDefaults_Deployment,
//! SetDefaults_ReplicaSet, SetDefaults_DaemonSet).

use super::pod::pod_template;
use crate::json::{default, object_mut};
use serde_json::{json, Map, Value};

pub(crate) fn deployment(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(strategy) = object_mut(spec, "strategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(rolling) = object_mut(strategy, "rollingUpdate") {
                default(rolling, "maxUnavailable", json!("25%"));
                default(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    pod_template(spec);
}

pub(crate) fn replica_set(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    pod_template(spec);
}

/// A DaemonSet rolls one node at a time by default, never surging (a node runs one copy).
pub(crate) fn daemon_set(obj: &mut Map<String, Value>) {
    let Some(spec) = object_mut(obj, "spec") else {
        return;
    };
    default(spec, "revisionHistoryLimit", json!(10));
    if let Some(strategy) = object_mut(spec, "updateStrategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(rolling) = object_mut(strategy, "rollingUpdate") {
                default(rolling, "maxUnavailable", json!(1));
                default(rolling, "maxSurge", json!(0));
            }
        }
    }
    pod_template(spec);
}
