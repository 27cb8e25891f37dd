//! RoleBinding and ClusterRoleBinding defaults (upstream SetDefaults_Subject): a User or Group
//! subject without an apiGroup is in rbac.authorization.k8s.io.

use crate::json::{each_object_mut, is_unset};
use serde_json::{json, Map, Value};

pub(crate) fn binding(obj: &mut Map<String, Value>) {
    each_object_mut(obj, "subjects", |s| {
        let kind = s.get("kind").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "User" | "Group") && is_unset(s, "apiGroup") {
            s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
        }
    });
}
