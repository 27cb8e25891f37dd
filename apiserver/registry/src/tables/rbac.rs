//! Role, ClusterRole, RoleBinding and ClusterRoleBinding rows (upstream printRole,
//! printRoleBinding and their cluster forms).

use super::{age, age_col, col, name, name_col, Column, AGE_DOC};
use crate::json::{items, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn role_columns() -> Vec<Column> {
    vec![name_col(), col("Created At", "date", 0, AGE_DOC)]
}

/// Roles print their creation time, not an age, as upstream does.
pub(super) fn role_cells(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let created = obj
        .get("metadata")
        .map_or("", |m| str_at(m, "creationTimestamp"));
    vec![name(obj), json!(created)]
}

pub(super) fn binding_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Role",
            "string",
            0,
            "RoleRef references a Role or ClusterRole.",
        ),
        age_col(),
        col("Users", "string", 1, "Users in the binding"),
        col("Groups", "string", 1, "Groups in the binding"),
        col(
            "ServiceAccounts",
            "string",
            1,
            "ServiceAccounts in the binding",
        ),
    ]
}

pub(super) fn binding_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let empty = json!({});
    let role_ref = obj.get("roleRef").unwrap_or(&empty);
    let of_kind = |kind: &str| -> Vec<String> {
        items(obj, "subjects")
            .iter()
            .filter(|s| str_at(s, "kind") == kind)
            .map(|s| match kind {
                "ServiceAccount" => format!("{}/{}", str_at(s, "namespace"), str_at(s, "name")),
                _ => str_at(s, "name").to_string(),
            })
            .collect()
    };
    vec![
        name(obj),
        json!(format!(
            "{}/{}",
            str_at(role_ref, "kind"),
            str_at(role_ref, "name")
        )),
        age(obj, now),
        json!(of_kind("User").join(", ")),
        json!(of_kind("Group").join(", ")),
        json!(of_kind("ServiceAccount").join(", ")),
    ]
}
