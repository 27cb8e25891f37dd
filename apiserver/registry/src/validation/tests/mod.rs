//! Validation tests, one file per group of kinds; names and metadata here.

mod apps;
mod autoscaling;
mod certificates;
mod core;
mod ephemeral;
mod network;
mod pod;
mod quota;
mod rbac;
mod service;

use super::validate;
use crate::{apply_defaults, Cause};
use serde_json::{json, Value};

/// Defaults then validates, like the server's create path.
pub(super) fn causes(kind: &str, mut obj: Value) -> Vec<Cause> {
    apply_defaults(kind, &mut obj);
    validate(kind, &obj, None)
}

/// (reason, field) pairs, the part of a 422 kubectl shows.
pub(super) fn fields(kind: &str, obj: Value) -> Vec<(String, String)> {
    causes(kind, obj)
        .into_iter()
        .map(|c| (c.reason, c.field))
        .collect()
}

pub(super) fn pair(reason: &str, field: &str) -> (String, String) {
    (reason.to_string(), field.to_string())
}

/// Every (reason, field) of `want` is among `got`.
pub(super) fn assert_has(got: &[(String, String)], want: &[(&str, &str)]) {
    for (reason, field) in want {
        assert!(
            got.contains(&pair(reason, field)),
            "missing ({reason}, {field}) in {got:?}"
        );
    }
}

#[test]
fn object_names_follow_each_kinds_rule() {
    let named = |kind: &str, name: &str| json!({"kind": kind, "metadata": {"name": name}});
    assert_eq!(fields("ConfigMap", named("ConfigMap", "a.b-c")), vec![]);
    assert_eq!(
        fields("Namespace", named("Namespace", "a.b")),
        vec![pair("FieldValueInvalid", "metadata.name")]
    );
    let svc = json!({"metadata": {"name": "1web"}, "spec": {"clusterIP": "None"}});
    assert_eq!(
        fields("Service", svc),
        vec![pair("FieldValueInvalid", "metadata.name")]
    );
    assert_eq!(
        fields("Secret", json!({"metadata": {}})),
        vec![pair("FieldValueRequired", "metadata.name")]
    );
    assert_eq!(
        fields("Secret", json!({"metadata": {"generateName": "s-"}})),
        vec![]
    );
    let labelled = json!({"metadata": {"name": "x", "labels": {"ok": "fine", "app": "bad value"},
        "annotations": {"example.com/a": "1"}}});
    assert_eq!(
        fields("ConfigMap", labelled),
        vec![pair("FieldValueInvalid", "metadata.labels")]
    );
    let huge = json!({"metadata": {"name": "x", "annotations": {"a": "x".repeat(300_000)}}});
    assert_eq!(
        fields("ConfigMap", huge),
        vec![pair("FieldValueTooLong", "metadata.annotations")]
    );
}
