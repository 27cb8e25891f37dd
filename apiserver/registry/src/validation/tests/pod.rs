use super::{assert_has, causes, fields};
use crate::validation::validate;
use crate::{apply_defaults, Cause};
use serde_json::{json, Value};

pub(super) fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default",
        "labels": {"app": "web"}}, "spec": spec})
}

fn web_container() -> Value {
    json!({"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 80}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "readinessProbe": {"httpGet": {"port": "http"}}})
}
#[test]
fn a_realistic_pod_is_valid() {
    let p = pod(json!({"containers": [web_container()],
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
        "volumes": [{"name": "data", "emptyDir": {}}]}));
    assert_eq!(causes("Pod", p), vec![]);
}

#[test]
fn pod_without_containers_names_the_field() {
    let c = causes("Pod", pod(json!({})));
    assert_eq!(
        c,
        vec![Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.containers".into(),
        }]
    );
}

#[test]
fn pod_container_errors_have_upstream_paths() {
    let p = pod(json!({"restartPolicy": "Sometimes", "containers": [
        {"name": "web", "image": "nginx", "ports": [{"containerPort": 70000, "protocol": "HTTP"}],
         "volumeMounts": [{"name": "missing", "mountPath": "/x"}]},
        {"name": "web", "image": ""},
        {"image": "x"},
        {"name": "Bad_Name", "image": "x"}],
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}));
    let got = fields("Pod", p);
    assert_has(
        &got,
        &[
            ("FieldValueNotSupported", "spec.restartPolicy"),
            (
                "FieldValueInvalid",
                "spec.containers[0].ports[0].containerPort",
            ),
            (
                "FieldValueNotSupported",
                "spec.containers[0].ports[0].protocol",
            ),
            (
                "FieldValueNotFound",
                "spec.containers[0].volumeMounts[0].name",
            ),
            ("FieldValueDuplicate", "spec.containers[1].name"),
            ("FieldValueRequired", "spec.containers[1].image"),
            ("FieldValueRequired", "spec.containers[2].name"),
            ("FieldValueInvalid", "spec.containers[3].name"),
            ("FieldValueDuplicate", "spec.volumes[1].name"),
        ],
    );
    assert_eq!(got.len(), 9, "{got:?}");
}

#[test]
fn pod_resources_probes_and_env() {
    let p = pod(json!({"containers": [{"name": "c", "image": "x:1",
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1", "memory": "lots"}},
        "livenessProbe": {"periodSeconds": 5},
        "env": [{"name": "1BAD", "value": "x"}]}]}));
    let c = causes("Pod", p);
    let find = |f: &str| c.iter().find(|c| c.field == f).map(|c| c.message.clone());
    assert_eq!(
        find("spec.containers[0].resources.requests[cpu]").as_deref(),
        Some("Invalid value: \"2\": must be less than or equal to cpu limit of 1")
    );
    assert!(find("spec.containers[0].resources.limits[memory]").is_some());
    assert_eq!(
        find("spec.containers[0].livenessProbe").as_deref(),
        Some("Required value: must specify a handler type")
    );
    assert!(find("spec.containers[0].env[0].name").is_some());
    // Requests copied from limits by defaulting carry the bad quantity too, as upstream.
    assert!(find("spec.containers[0].resources.requests[memory]").is_some());
    assert_eq!(c.len(), 5, "{c:?}");
}

#[test]
fn lifecycle_hooks_have_one_handler_and_sleep_within_the_grace_period() {
    let hooks = |pre_stop: Value| {
        json!({"name": "c", "image": "x:1", "lifecycle": {"preStop": pre_stop,
            "postStart": {"exec": {"command": []}, "httpGet": {"port": 80}}}})
    };
    let p = pod(json!({"terminationGracePeriodSeconds": 10,
        "containers": [hooks(json!({"sleep": {"seconds": 11}})),
            json!({"name": "ok", "image": "x:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}),
            json!({"name": "zero", "image": "x:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 0}}}})],
        "initContainers": [{"name": "init", "image": "x:1",
            "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}]}));
    let c = causes("Pod", p);
    let find = |f: &str| c.iter().find(|c| c.field == f).map(|c| c.message.clone());
    let too_long = "Invalid value: 11: must be greater than 0 and less than terminationGracePeriodSeconds (10)";
    assert_eq!(
        find("spec.containers[0].lifecycle.preStop.sleep").as_deref(),
        Some(too_long)
    );
    assert!(find("spec.containers[2].lifecycle.preStop.sleep").is_some());
    assert_eq!(
        find("spec.containers[0].lifecycle.postStart.httpGet").as_deref(),
        Some("Forbidden: may not specify more than 1 handler type")
    );
    assert_eq!(
        find("spec.containers[0].lifecycle.postStart.exec.command").as_deref(),
        Some("Required value")
    );
    assert_eq!(
        find("spec.initContainers[0].lifecycle").as_deref(),
        Some("Forbidden: may not be set for init containers without restartPolicy=Always")
    );
    assert_eq!(c.len(), 5, "{c:?}");
}

#[test]
fn pod_update_allows_only_image_changes() {
    let mut old = pod(json!({"nodeName": "n1", "containers": [{"name": "c", "image": "x:1"}]}));
    apply_defaults("Pod", &mut old);
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("x:2");
    new["spec"]["activeDeadlineSeconds"] = json!(60);
    assert_eq!(validate("Pod", &new, Some(&old)), vec![]);
    new["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "protocol": "TCP"}]);
    let c = validate("Pod", &new, Some(&old));
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].reason.as_str(), c[0].field.as_str()),
        ("FieldValueForbidden", "spec")
    );
    assert!(c[0]
        .message
        .starts_with("Forbidden: pod updates may not change fields"));
}

#[test]
fn pod_binding_may_set_node_name_once() {
    let mut old = pod(json!({"containers": [{"name": "c", "image": "x:1"}]}));
    apply_defaults("Pod", &mut old);
    let mut bound = old.clone();
    bound["spec"]["nodeName"] = json!("node-1");
    assert_eq!(validate("Pod", &bound, Some(&old)), vec![]);
    let mut moved = bound.clone();
    moved["spec"]["nodeName"] = json!("node-2");
    let got: Vec<String> = validate("Pod", &moved, Some(&bound))
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(got, vec!["spec"]);
}

#[test]
fn fields_the_agent_acts_on_stay_inside_the_pod() {
    let mut c = web_container();
    c["volumeMounts"] = json!([
        {"name": "data", "mountPath": "/a", "subPath": "/"},
        {"name": "data", "mountPath": "/b", "subPath": "x/../../etc"},
        {"name": "data", "mountPath": "/c", "subPath": "logs", "subPathExpr": "$(POD)"},
        {"name": "data", "mountPath": "/d", "subPath": "ok/dir..name"}]);
    c["livenessProbe"] = json!({"httpGet": {"port": 80, "path": "/x\r\nHost: evil",
        "httpHeaders": [{"name": "X Bad", "value": "v"}, {"name": "X-Ok", "value": "a\nb"}]}});
    c["readinessProbe"] = json!({"httpGet": {"port": 70000, "path": "healthz"}});
    let p = pod(json!({"containers": [c], "volumes": [
        {"name": "data", "emptyDir": {"medium": "Disk", "sizeLimit": "-1Gi"}},
        {"name": "host", "hostPath": {"path": "/var/../etc", "type": "Anything"}}]}));
    let got = causes("Pod", p);
    let mounts = "spec.containers[0].volumeMounts";
    let want = [
        (
            format!("{mounts}[0].subPath"),
            "Invalid value: \"/\": must be a relative path",
        ),
        (
            format!("{mounts}[1].subPath"),
            "Invalid value: \"x/../../etc\": must not contain '..'",
        ),
        (
            format!("{mounts}[2].subPathExpr"),
            "Invalid value: \"$(POD)\": subPathExpr and subPath are mutually exclusive",
        ),
    ];
    for (field, message) in &want {
        assert!(
            got.iter()
                .any(|c| &c.field == field && c.message == *message),
            "{field}: {got:?}"
        );
    }
    let fields: Vec<&str> = got.iter().map(|c| c.field.as_str()).collect();
    for f in [
        "spec.containers[0].livenessProbe.httpGet.path",
        "spec.containers[0].livenessProbe.httpGet.httpHeaders[0].name",
        "spec.containers[0].livenessProbe.httpGet.httpHeaders[1].value",
        "spec.containers[0].readinessProbe.httpGet.path",
        "spec.containers[0].readinessProbe.httpGet.port",
        "spec.volumes[0].emptyDir.medium",
        "spec.volumes[0].emptyDir.sizeLimit",
        "spec.volumes[1].hostPath.path",
        "spec.volumes[1].hostPath.type",
    ] {
        assert!(fields.contains(&f), "{f} missing in {fields:?}");
    }
    assert!(
        !fields.iter().any(|f| f.contains("volumeMounts[3]")),
        "{fields:?}"
    );
}
