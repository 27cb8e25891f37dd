use super::super::tests::{assert_has, causes, fields, pair};
use crate::apply_defaults;
use crate::validation::validate;
use serde_json::{json, Value};

fn sts(extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 3,
        "serviceName": "db",
        "selector": { "matchLabels": { "app": "db" } },
        "template": { "metadata": { "labels": { "app": "db" } },
            "spec": { "containers": [{ "name": "c", "image": "busybox:1.35",
                "volumeMounts": [{ "name": "data", "mountPath": "/data" }] }] } },
        "volumeClaimTemplates": [{ "metadata": { "name": "data" },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } }],
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({ "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": { "name": "web", "namespace": "default" }, "spec": spec })
}

#[test]
fn a_stateful_set_mounting_its_claim_template_is_valid() {
    assert_eq!(causes("StatefulSet", sts(json!({}))), vec![]);
}

#[test]
fn spec_errors_name_their_fields() {
    let bad = sts(json!({
        "replicas": -1,
        "podManagementPolicy": "Random",
        "updateStrategy": { "type": "OnDelete", "rollingUpdate": { "partition": 1 } },
        "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Keep", "whenScaled": "Delete" },
        "selector": {},
    }));
    let got = fields("StatefulSet", bad);
    assert_has(
        &got,
        &[
            ("FieldValueInvalid", "spec.replicas"),
            ("FieldValueInvalid", "spec.podManagementPolicy"),
            ("FieldValueInvalid", "spec.updateStrategy.rollingUpdate"),
            (
                "FieldValueNotSupported",
                "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
            ),
            ("FieldValueInvalid", "spec.selector"),
        ],
    );
    let c = causes(
        "StatefulSet",
        sts(json!({ "podManagementPolicy": "Random" })),
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        c[0].message,
        "Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"
    );
}

#[test]
fn partitions_and_ordinals_are_not_negative_and_pods_restart_always() {
    let bad = sts(json!({
        "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": -1 } },
        "ordinals": { "start": -2 },
    }));
    let mut bad = bad;
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    bad["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    let got = fields("StatefulSet", bad);
    assert_has(
        &got,
        &[
            (
                "FieldValueInvalid",
                "spec.updateStrategy.rollingUpdate.partition",
            ),
            ("FieldValueInvalid", "spec.ordinals.start"),
            ("FieldValueNotSupported", "spec.template.spec.restartPolicy"),
            (
                "FieldValueForbidden",
                "spec.template.spec.activeDeadlineSeconds",
            ),
        ],
    );
}

#[test]
fn claim_templates_need_distinct_valid_names() {
    let templates = json!([
        { "metadata": { "name": "data" }, "spec": {} },
        { "metadata": { "name": "data" }, "spec": {} },
        { "metadata": { "name": "Bad_Name" }, "spec": {} },
    ]);
    let got = fields(
        "StatefulSet",
        sts(json!({ "volumeClaimTemplates": templates })),
    );
    assert_has(
        &got,
        &[
            (
                "FieldValueDuplicate",
                "spec.volumeClaimTemplates[1].metadata.name",
            ),
            (
                "FieldValueInvalid",
                "spec.volumeClaimTemplates[2].metadata.name",
            ),
        ],
    );
}

#[test]
fn updates_may_change_only_replicas_template_strategy_and_the_like() {
    let mut old = sts(json!({}));
    apply_defaults("StatefulSet", &mut old);
    let mut scaled = old.clone();
    scaled["spec"]["replicas"] = json!(5);
    scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36");
    scaled["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(2);
    assert_eq!(validate("StatefulSet", &scaled, Some(&old)), vec![]);
    let mut renamed = old.clone();
    renamed["spec"]["serviceName"] = json!("other");
    let c = validate("StatefulSet", &renamed, Some(&old));
    assert_eq!(
        c.iter()
            .map(|c| (c.reason.clone(), c.field.clone()))
            .collect::<Vec<_>>(),
        [pair("FieldValueForbidden", "spec")]
    );
    assert!(c[0]
        .message
        .contains("'replicas', 'ordinals', 'template', 'updateStrategy'"));
}

#[test]
fn controller_revision_data_is_immutable_and_the_number_not_negative() {
    let rev = json!({ "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": { "name": "web-abc", "namespace": "default" },
        "data": { "spec": { "template": { "$patch": "replace" } } }, "revision": 1 });
    assert_eq!(validate("ControllerRevision", &rev, None), vec![]);
    let mut renumbered = rev.clone();
    renumbered["revision"] = json!(4);
    assert_eq!(
        validate("ControllerRevision", &renumbered, Some(&rev)),
        vec![]
    );
    let mut changed = rev.clone();
    changed["data"] = json!({});
    changed["revision"] = json!(-1);
    let got: Vec<_> = validate("ControllerRevision", &changed, Some(&rev))
        .into_iter()
        .map(|c| (c.reason, c.field))
        .collect();
    assert_has(
        &got,
        &[
            ("FieldValueInvalid", "data"),
            ("FieldValueInvalid", "revision"),
        ],
    );
}
