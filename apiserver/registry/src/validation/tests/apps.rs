use super::{assert_has, causes, fields, pair};
use crate::apply_defaults;
use crate::validation::validate;
use serde_json::{json, Value};

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn web_template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}})
}
#[test]
fn a_realistic_deployment_is_valid() {
    let d = deployment(
        json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
        "template": web_template()}),
    );
    assert_eq!(causes("Deployment", d), vec![]);
}

#[test]
fn deployment_without_selector() {
    let d = deployment(json!({"template": web_template()}));
    assert_eq!(
        fields("Deployment", d),
        vec![pair("FieldValueRequired", "spec.selector")]
    );
}

#[test]
fn deployment_selector_must_match_template() {
    let d =
        deployment(json!({"selector": {"matchLabels": {"app": "db"}}, "template": web_template()}));
    let c = causes("Deployment", d);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].field, "spec.template.metadata.labels");
    assert_eq!(
        c[0].message,
        "Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"
    );
}

#[test]
fn deployment_spec_errors() {
    let d = deployment(
        json!({"replicas": -1, "selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In"}]},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "web"}]}}}),
    );
    let got = fields("Deployment", d);
    assert_has(
        &got,
        &[
            ("FieldValueInvalid", "spec.replicas"),
            (
                "FieldValueRequired",
                "spec.selector.matchExpressions[0].values",
            ),
            (
                "FieldValueInvalid",
                "spec.strategy.rollingUpdate.maxUnavailable",
            ),
            ("FieldValueNotSupported", "spec.template.spec.restartPolicy"),
            (
                "FieldValueRequired",
                "spec.template.spec.containers[0].image",
            ),
        ],
    );
    // The In expression without values cannot match, so the labels mismatch is reported too.
    assert!(got.contains(&pair("FieldValueInvalid", "spec.template.metadata.labels")));
    assert_eq!(got.len(), 6, "{got:?}");
}

#[test]
fn deployment_template_needs_containers() {
    let d = deployment(json!({"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}}));
    assert_eq!(
        fields("Deployment", d),
        vec![pair("FieldValueRequired", "spec.template.spec.containers")]
    );
}

#[test]
fn apps_selectors_are_immutable() {
    for kind in ["Deployment", "ReplicaSet"] {
        let mut old = deployment(json!({"selector": {"matchLabels": {"app": "web"}},
            "template": web_template()}));
        apply_defaults(kind, &mut old);
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(5);
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
        assert_eq!(validate(kind, &new, Some(&old)), vec![], "{kind}");
        new["spec"]["selector"]["matchLabels"]["tier"] = json!("fe");
        new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("fe");
        let c = validate(kind, &new, Some(&old));
        assert_eq!(c.len(), 1, "{kind}: {c:?}");
        assert_eq!(c[0].field, "spec.selector");
        assert!(c[0].message.ends_with("field is immutable"));
    }
}

fn daemon_set(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"}, "spec": spec})
}

#[test]
fn daemon_set_defaults_roll_one_node_at_a_time() {
    let mut ds = daemon_set(json!({"selector": {"matchLabels": {"app": "web"}},
        "template": web_template()}));
    apply_defaults("DaemonSet", &mut ds);
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(ds["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(validate("DaemonSet", &ds, None), vec![]);
    let mut on_delete = daemon_set(json!({"selector": {"matchLabels": {"app": "web"}},
        "template": web_template(), "updateStrategy": {"type": "OnDelete"}}));
    apply_defaults("DaemonSet", &mut on_delete);
    assert_eq!(
        on_delete["spec"]["updateStrategy"],
        json!({"type": "OnDelete"})
    );
}

#[test]
fn daemon_set_errors() {
    let got = fields(
        "DaemonSet",
        daemon_set(json!({"selector": {"matchLabels": {"app": "other"}},
            "template": web_template(),
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}})),
    );
    assert_has(
        &got,
        &[
            ("FieldValueInvalid", "spec.template.metadata.labels"),
            (
                "FieldValueInvalid",
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
            ),
        ],
    );
    let empty = causes(
        "DaemonSet",
        daemon_set(json!({"selector": {}, "template": web_template(),
            "updateStrategy": {"type": "Sometimes"}})),
    );
    let messages: Vec<&str> = empty.iter().map(|c| c.message.as_str()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.ends_with("empty selector is invalid for daemonset")),
        "{messages:?}"
    );
    assert!(
        empty
            .iter()
            .any(|c| c.field == "spec.updateStrategy.type" && c.reason == "FieldValueNotSupported"),
        "{empty:?}"
    );
}
