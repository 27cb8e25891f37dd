//! Ephemeral containers: refused on create and in templates, added only through the
//! subresource, never changed or removed, and without the fields upstream refuses them.

use super::pod::pod;
use super::{assert_has, fields, pair};
use crate::validation::{validate, validate_ephemeral_containers};
use crate::{apply_defaults, Cause};
use serde_json::{json, Value};

/// A stored (defaulted) pod with containers `app` and init `setup`, bound to a node.
fn stored() -> Value {
    let mut p = pod(
        json!({"nodeName": "n1", "containers": [{"name": "app", "image": "nginx"}],
        "initContainers": [{"name": "setup", "image": "busybox"}],
        "volumes": [{"name": "data", "emptyDir": {}}]}),
    );
    apply_defaults("Pod", &mut p);
    p
}

/// `old` with `list` as its ephemeral containers, defaulted as the server defaults a write.
fn with_ephemeral(old: &Value, list: Value) -> Value {
    let mut new = old.clone();
    new["spec"]["ephemeralContainers"] = list;
    apply_defaults("Pod", &mut new);
    new
}

fn debugger(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "targetContainerName": "app", "stdin": true,
        "tty": true, "terminationMessagePolicy": "File", "resources": {}})
}

fn reasons(c: &[Cause]) -> Vec<(String, String)> {
    c.iter()
        .map(|c| (c.reason.clone(), c.field.clone()))
        .collect()
}

#[test]
fn ephemeral_containers_cannot_be_set_on_create_nor_in_a_template() {
    let p = pod(json!({"containers": [{"name": "app", "image": "nginx"}],
        "ephemeralContainers": [debugger("dbg")]}));
    let got = super::causes("Pod", p);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].field.as_str(), got[0].message.as_str()),
        (
            "spec.ephemeralContainers",
            "Forbidden: cannot be set on create"
        )
    );
    let d = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}],
            "ephemeralContainers": [debugger("dbg")]}}}});
    assert_has(
        &fields("Deployment", d),
        &[(
            "FieldValueForbidden",
            "spec.template.spec.ephemeralContainers",
        )],
    );
}

#[test]
fn the_subresource_adds_a_debugger_without_the_main_updates_rule() {
    let old = stored();
    let one = with_ephemeral(&old, json!([debugger("dbg")]));
    assert_eq!(validate_ephemeral_containers(&one, &old), vec![]);
    assert_eq!(
        one["spec"]["ephemeralContainers"][0]["imagePullPolicy"],
        "Always"
    );
    // A second one keeps the first as it was.
    let two = with_ephemeral(&one, json!([debugger("dbg"), debugger("dbg2")]));
    assert_eq!(validate_ephemeral_containers(&two, &one), vec![]);
    // The same change through the main resource is an update of an immutable spec.
    let main = validate("Pod", &one, Some(&old));
    assert_eq!(reasons(&main), vec![pair("FieldValueForbidden", "spec")]);
}

#[test]
fn existing_ephemeral_containers_may_not_be_changed_or_removed() {
    let old = with_ephemeral(&stored(), json!([debugger("dbg")]));
    let mut changed_list = debugger("dbg");
    changed_list["image"] = json!("alpine");
    let changed = with_ephemeral(&old, json!([changed_list]));
    let got = validate_ephemeral_containers(&changed, &old);
    assert_eq!(
        reasons(&got),
        vec![pair("FieldValueForbidden", "spec.ephemeralContainers")]
    );
    assert!(
        got[0]
            .message
            .starts_with("Forbidden: existing ephemeral containers \"dbg\" may not be changed\n"),
        "{got:?}"
    );
    assert!(got[0].message.contains("+ image: \"alpine\""), "{got:?}");
    let removed = with_ephemeral(&old, json!([]));
    let got = validate_ephemeral_containers(&removed, &old);
    assert_eq!(
        got[0].message,
        "Forbidden: existing ephemeral containers \"dbg\" may not be removed\n"
    );
    // Reordered but equal is no change (a patch does not keep the order).
    let two = with_ephemeral(&old, json!([debugger("dbg"), debugger("dbg2")]));
    let swapped = with_ephemeral(&two, json!([debugger("dbg2"), debugger("dbg")]));
    assert_eq!(validate_ephemeral_containers(&swapped, &two), vec![]);
}

#[test]
fn names_are_unique_across_every_kind_of_container() {
    let old = stored();
    let mut unnamed = debugger("");
    unnamed["image"] = json!("");
    let new = with_ephemeral(
        &old,
        json!([
            debugger("app"),
            debugger("setup"),
            debugger("x"),
            debugger("x"),
            unnamed
        ]),
    );
    let got = reasons(&validate_ephemeral_containers(&new, &old));
    assert_eq!(
        got,
        vec![
            pair("FieldValueDuplicate", "spec.ephemeralContainers[0].name"),
            pair("FieldValueDuplicate", "spec.ephemeralContainers[1].name"),
            pair("FieldValueDuplicate", "spec.ephemeralContainers[3].name"),
            pair("FieldValueRequired", "spec.ephemeralContainers[4].name"),
            pair("FieldValueRequired", "spec.ephemeralContainers[4].image"),
        ]
    );
}

#[test]
fn fields_for_the_pods_work_are_refused_in_upstreams_order() {
    let old = stored();
    let mut c = debugger("dbg");
    let extra = json!({"ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}},
        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
        "restartPolicy": "Always", "livenessProbe": {"exec": {"command": ["true"]}},
        "readinessProbe": {"exec": {"command": ["true"]}},
        "startupProbe": {"exec": {"command": ["true"]}},
        "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
        "volumeMounts": [{"name": "data", "mountPath": "/d", "subPath": "x"},
            {"name": "data", "mountPath": "/e", "subPathExpr": "$(POD)"}]});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    let new = with_ephemeral(&old, json!([c]));
    let got = validate_ephemeral_containers(&new, &old);
    let forbidden: Vec<&str> = got
        .iter()
        .filter(|c| c.message == "Forbidden: cannot be set for an Ephemeral Container")
        .map(|c| c.field.as_str())
        .collect();
    let at = |f: &str| format!("spec.ephemeralContainers[0].{f}");
    let want: Vec<String> = [
        "ports",
        "resources",
        "resizePolicy",
        "restartPolicy",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
        "volumeMounts[0].subPath",
        "volumeMounts[1].subPathExpr",
    ]
    .iter()
    .map(|f| at(f))
    .collect();
    assert_eq!(forbidden, want, "{got:?}");
    // An empty resources object is Go's zero value: not set.
    let plain = with_ephemeral(&old, json!([debugger("dbg")]));
    assert_eq!(
        plain["spec"]["ephemeralContainers"][0]["resources"],
        json!({})
    );
    assert_eq!(validate_ephemeral_containers(&plain, &old), vec![]);
}

#[test]
fn the_target_must_be_a_container_or_init_container_of_the_pod() {
    let old = stored();
    let mut on_init = debugger("a");
    on_init["targetContainerName"] = json!("setup");
    let mut on_other = debugger("b");
    on_other["targetContainerName"] = json!("a");
    let mut nowhere = debugger("c");
    nowhere["targetContainerName"] = json!("nope");
    let new = with_ephemeral(&old, json!([on_init, on_other, nowhere]));
    let got = validate_ephemeral_containers(&new, &old);
    assert_eq!(
        reasons(&got),
        vec![
            pair(
                "FieldValueNotFound",
                "spec.ephemeralContainers[1].targetContainerName"
            ),
            pair(
                "FieldValueNotFound",
                "spec.ephemeralContainers[2].targetContainerName"
            ),
        ]
    );
    assert_eq!(got[1].message, "Not found: \"nope\"");
}

#[test]
fn static_pods_take_no_ephemeral_containers() {
    let mut old = stored();
    old["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
    let mut bad = debugger("");
    bad["ports"] = json!([{"containerPort": 80}]);
    let new = with_ephemeral(&old, json!([bad]));
    let got = validate_ephemeral_containers(&new, &old);
    assert_eq!(
        got,
        vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: static pods do not support ephemeral containers".into(),
            field: "".into(),
        }]
    );
}
