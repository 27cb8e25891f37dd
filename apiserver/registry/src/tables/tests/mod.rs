//! Table tests: pods in pod.rs, the other kinds in kinds.rs.

mod kinds;
mod pod;
mod rbac;

use super::{cells, columns};
use crate::resources::RESOURCES;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn now() -> DateTime<Utc> {
    "2026-12-02T12:00:00Z".parse().expect("valid time")
}

pub(super) fn meta(name: &str) -> Value {
    json!({"name": name, "namespace": "default", "creationTimestamp": "2026-12-02T11:55:00Z"})
}

/// The row as kubectl shows it: column name (upper-cased like kubectl) -> cell.
pub(super) fn row(kind: &str, obj: &Value) -> Vec<(String, Value)> {
    let cols = columns(kind);
    let cells = cells(kind, obj, now());
    assert_eq!(cols.len(), cells.len(), "{kind}");
    cols.iter()
        .map(|c| c.name.to_uppercase())
        .zip(cells)
        .collect()
}

/// The row's cells alone, in column order.
pub(super) fn values(kind: &str, obj: &Value) -> Vec<Value> {
    row(kind, obj).into_iter().map(|(_, v)| v).collect()
}

pub(super) fn cell(kind: &str, obj: &Value, column: &str) -> Value {
    row(kind, obj)
        .into_iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{kind} has no column {column}"))
}

/// Asserts the text of each (column, text) cell of `obj`'s row.
pub(super) fn assert_cells(kind: &str, obj: &Value, want: &[(&str, &str)]) {
    for (column, text) in want {
        assert_eq!(cell(kind, obj, column), *text, "{kind} {column}");
    }
}

#[test]
fn every_kind_has_name_and_age_and_matching_cells() {
    for kind in RESOURCES.iter().map(|r| r.kind).chain(["Widget"]) {
        let cols = columns(kind);
        let obj = json!({"metadata": meta("x")});
        assert_eq!(cells(kind, &obj, now()).len(), cols.len(), "{kind}");
        let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
        assert!(names.contains(&"Name"), "{kind}: {names:?}");
        if kind != "Event" {
            assert_eq!(cols[0].format, "name", "{kind}");
        }
        // Roles and LimitRanges print "Created At" instead, as upstream.
        if !matches!(kind, "Event" | "Role" | "ClusterRole" | "LimitRange") {
            assert!(names.contains(&"Age"), "{kind}");
        }
    }
    let names: Vec<&str> = columns("Widget").iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["Name", "Age"]);
}
