//! StatefulSet and ControllerRevision rows (upstream's printStatefulSet and
//! printControllerRevision).

use super::{age, age_col, col, name, name_col, template_cells, template_columns, Column};
use crate::json::{at, int_at, str_at};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn stateful_set_columns() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        col("Ready", "string", 0, "Number of the pod with ready state"),
        age_col(),
    ];
    cols.extend(template_columns());
    cols
}

/// READY is readyReplicas/spec.replicas (replicas defaults to 1).
pub(super) fn stateful_set_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let desired = at(obj, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = obj
        .get("status")
        .and_then(|s| int_at(s, "readyReplicas"))
        .unwrap_or(0);
    let mut cells = vec![
        name(obj),
        json!(format!("{ready}/{desired}")),
        age(obj, now),
    ];
    cells.extend(template_cells(obj, &["spec", "template", "spec"]));
    cells
}

pub(super) fn controller_revision_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Controller", "string", 0, "Controller of the object"),
        col(
            "Revision",
            "integer",
            0,
            "Revision indicates the revision of the state represented by Data.",
        ),
        age_col(),
    ]
}

/// CONTROLLER is `<kind>.<group>/<name>` in lower case (statefulset.apps/web), "<none>" when
/// no ownerReference is the controller.
pub(super) fn controller_revision_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let owners = at(obj, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let controller = owners
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .map_or_else(
            || "<none>".to_string(),
            |o| {
                let group = str_at(o, "apiVersion")
                    .rsplit_once('/')
                    .map_or("", |(g, _)| g);
                let kind = match group {
                    "" => str_at(o, "kind").to_string(),
                    g => format!("{}.{g}", str_at(o, "kind")),
                };
                format!("{}/{}", kind.to_lowercase(), str_at(o, "name"))
            },
        );
    vec![
        name(obj),
        json!(controller),
        json!(int_at(obj, "revision").unwrap_or(0)),
        age(obj, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::tests::{meta, values};
    use serde_json::json;

    #[test]
    fn stateful_sets_print_ready_over_desired() {
        let sts = json!({
            "metadata": meta("web"),
            "spec": { "replicas": 3, "template": { "spec": { "containers": [
                { "name": "a", "image": "x:1" }, { "name": "b", "image": "y:2" }] } } },
            "status": { "replicas": 2, "readyReplicas": 2 },
        });
        assert_eq!(
            values("StatefulSet", &sts),
            [
                json!("web"),
                json!("2/3"),
                json!("5m"),
                json!("a,b"),
                json!("x:1,y:2")
            ]
        );
        let fresh = json!({ "metadata": meta("db"), "spec": {} });
        assert_eq!(values("StatefulSet", &fresh)[1], json!("0/1"));
    }

    #[test]
    fn controller_revisions_print_their_controller_and_number() {
        let rev = json!({
            "metadata": { "ownerReferences": [
                { "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true }],
                "name": "web-5d8c", "namespace": "default", "creationTimestamp": "2026-12-02T11:55:00Z" },
            "data": {}, "revision": 2,
        });
        assert_eq!(
            values("ControllerRevision", &rev),
            [
                json!("web-5d8c"),
                json!("statefulset.apps/web"),
                json!(2),
                json!("5m")
            ]
        );
        let orphan = json!({ "metadata": meta("x"), "revision": 1 });
        assert_eq!(values("ControllerRevision", &orphan)[1], json!("<none>"));
    }
}
