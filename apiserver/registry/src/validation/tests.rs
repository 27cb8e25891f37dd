use super::validate;
use crate::{apply_defaults, Cause};
use serde_json::{json, Value};

/// Defaults then validates, like the server's create path.
fn causes(kind: &str, mut obj: Value) -> Vec<Cause> {
    apply_defaults(kind, &mut obj);
    validate(kind, &obj, None)
}

/// (reason, field) pairs, the part of a 422 kubectl shows.
fn fields(kind: &str, obj: Value) -> Vec<(String, String)> {
    causes(kind, obj)
        .into_iter()
        .map(|c| (c.reason, c.field))
        .collect()
}

fn pair(reason: &str, field: &str) -> (String, String) {
    (reason.to_string(), field.to_string())
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default",
        "labels": {"app": "web"}}, "spec": spec})
}

fn web_container() -> Value {
    json!({"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 80}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "readinessProbe": {"httpGet": {"port": "http"}}})
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn web_template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}})
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
    for want in [
        pair("FieldValueNotSupported", "spec.restartPolicy"),
        pair(
            "FieldValueInvalid",
            "spec.containers[0].ports[0].containerPort",
        ),
        pair(
            "FieldValueNotSupported",
            "spec.containers[0].ports[0].protocol",
        ),
        pair(
            "FieldValueNotFound",
            "spec.containers[0].volumeMounts[0].name",
        ),
        pair("FieldValueDuplicate", "spec.containers[1].name"),
        pair("FieldValueRequired", "spec.containers[1].image"),
        pair("FieldValueRequired", "spec.containers[2].name"),
        pair("FieldValueInvalid", "spec.containers[3].name"),
        pair("FieldValueDuplicate", "spec.volumes[1].name"),
    ] {
        assert!(got.contains(&want), "missing {want:?} in {got:?}");
    }
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
    for want in [
        pair("FieldValueInvalid", "spec.replicas"),
        pair(
            "FieldValueRequired",
            "spec.selector.matchExpressions[0].values",
        ),
        pair(
            "FieldValueInvalid",
            "spec.strategy.rollingUpdate.maxUnavailable",
        ),
        pair("FieldValueNotSupported", "spec.template.spec.restartPolicy"),
        pair(
            "FieldValueRequired",
            "spec.template.spec.containers[0].image",
        ),
    ] {
        assert!(got.contains(&want), "missing {want:?} in {got:?}");
    }
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

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec})
}

#[test]
fn a_realistic_service_is_valid() {
    let s = service(json!({"type": "NodePort", "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080},
                  {"name": "https", "port": 443, "targetPort": 8443}]}));
    assert_eq!(causes("Service", s), vec![]);
    let headless = service(json!({"clusterIP": "None", "selector": {"app": "web"}}));
    assert_eq!(causes("Service", headless), vec![]);
}

#[test]
fn service_errors() {
    assert_eq!(
        fields("Service", service(json!({"selector": {"app": "web"}}))),
        vec![pair("FieldValueRequired", "spec.ports")]
    );
    let s = service(json!({"type": "Magic", "selector": {"bad key!": "x"},
        "ports": [{"port": 0}, {"name": "b", "port": 80, "targetPort": 70000, "nodePort": 30001},
                  {"name": "b", "port": 81, "targetPort": "Not_A_Name"}]}));
    let got = fields("Service", s);
    for want in [
        pair("FieldValueNotSupported", "spec.type"),
        pair("FieldValueInvalid", "spec.selector"),
        pair("FieldValueRequired", "spec.ports[0].name"),
        pair("FieldValueInvalid", "spec.ports[0].port"),
        pair("FieldValueInvalid", "spec.ports[1].targetPort"),
        pair("FieldValueDuplicate", "spec.ports[2].name"),
        pair("FieldValueInvalid", "spec.ports[2].targetPort"),
    ] {
        assert!(got.contains(&want), "missing {want:?} in {got:?}");
    }
    let s = service(json!({"ports": [{"port": 80, "nodePort": 30001}]}));
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueForbidden", "spec.ports[0].nodePort")]
    );
    let s = service(json!({"type": "ExternalName"}));
    assert_eq!(
        fields("Service", s),
        vec![pair("FieldValueRequired", "spec.externalName")]
    );
}

#[test]
fn service_cluster_ip_is_immutable() {
    let mut old = service(json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}));
    apply_defaults("Service", &mut old);
    let mut new = old.clone();
    new["spec"]["ports"][0]["port"] = json!(81);
    assert_eq!(validate("Service", &new, Some(&old)), vec![]);
    new["spec"]["clusterIP"] = json!("10.96.0.11");
    new["spec"]["clusterIPs"] = json!(["10.96.0.11"]);
    let got: Vec<String> = validate("Service", &new, Some(&old))
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(got, vec!["spec.clusterIP"]);
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

#[test]
fn endpoint_slices() {
    let ok = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 80}]});
    assert_eq!(causes("EndpointSlice", ok.clone()), vec![]);
    let bad = json!({"metadata": {"name": "web-abc"},
        "endpoints": [{"addresses": []}], "ports": [{"port": 80}]});
    assert_eq!(
        fields("EndpointSlice", bad),
        vec![
            pair("FieldValueRequired", "addressType"),
            pair("FieldValueRequired", "endpoints[0].addresses")
        ]
    );
    let mut wrong = ok.clone();
    wrong["endpoints"][0]["addresses"] = json!(["fd00::1"]);
    assert_eq!(
        fields("EndpointSlice", wrong.clone()),
        vec![pair("FieldValueInvalid", "endpoints[0].addresses[0]")]
    );
    wrong["addressType"] = json!("IPv6");
    apply_defaults("EndpointSlice", &mut wrong);
    let got = validate("EndpointSlice", &wrong, Some(&ok));
    assert_eq!(
        got.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["addressType"]
    );
}

#[test]
fn endpoints() {
    let e = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.300"}],
        "ports": [{"port": 80}, {"name": "b", "port": 81}]}]});
    assert_eq!(
        fields("Endpoints", e),
        vec![
            pair("FieldValueInvalid", "subsets[0].addresses[0].ip"),
            pair("FieldValueRequired", "subsets[0].ports[0].name")
        ]
    );
}

fn ingress(paths: Value) -> Value {
    json!({"metadata": {"name": "web"}, "spec": {"ingressClassName": "keelson",
        "rules": [{"host": "web.example.test", "http": {"paths": paths}}]}})
}

#[test]
fn ingress_paths() {
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let ok = ingress(json!([{"path": "/", "pathType": "Prefix", "backend": backend}]));
    assert_eq!(causes("Ingress", ok), vec![]);
    let bad = ingress(json!([{"path": "/", "backend": backend},
        {"path": "api", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {}}}}]));
    let c = causes("Ingress", bad);
    let got: Vec<(&str, &str)> = c
        .iter()
        .map(|c| (c.reason.as_str(), c.field.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("FieldValueRequired", "spec.rules[0].http.paths[0].pathType"),
            ("FieldValueInvalid", "spec.rules[0].http.paths[1].path"),
            (
                "FieldValueInvalid",
                "spec.rules[0].http.paths[1].backend.service.port"
            ),
        ]
    );
    assert_eq!(c[0].message, "Required value: pathType must be specified");
    let ip_host = json!({"metadata": {"name": "x"}, "spec": {"rules": [{"host": "10.0.0.1"}]}});
    assert_eq!(
        fields("Ingress", ip_host),
        vec![pair("FieldValueInvalid", "spec.rules[0].host")]
    );
    let empty = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(
        fields("Ingress", empty),
        vec![pair("FieldValueInvalid", "spec")]
    );
}

#[test]
fn ingress_classes() {
    let ok =
        json!({"metadata": {"name": "keelson"}, "spec": {"controller": "keelson.dev/ingress"}});
    assert_eq!(causes("IngressClass", ok.clone()), vec![]);
    let bad = json!({"metadata": {"name": "x"}, "spec": {"controller": "nginx"}});
    assert_eq!(
        fields("IngressClass", bad.clone()),
        vec![pair("FieldValueInvalid", "spec.controller")]
    );
    let none = json!({"metadata": {"name": "x"}, "spec": {}});
    assert_eq!(
        fields("IngressClass", none),
        vec![pair("FieldValueRequired", "spec.controller")]
    );
    let mut changed = ok.clone();
    changed["spec"]["controller"] = json!("other.dev/ingress");
    let c = validate("IngressClass", &changed, Some(&ok));
    assert_eq!(
        c.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["spec.controller"]
    );
}

#[test]
fn config_maps_and_secrets() {
    let cm = json!({"metadata": {"name": "cfg"}, "data": {"app.conf": "x", "a/b": "y"}});
    assert_eq!(
        fields("ConfigMap", cm),
        vec![pair("FieldValueInvalid", "data[a/b]")]
    );
    let s = json!({"metadata": {"name": "s"}, "data": {"user": "YWRtaW4=", "pw": "not base64!"},
        "stringData": {"token": "abc"}});
    let mut defaulted = s.clone();
    apply_defaults("Secret", &mut defaulted);
    assert_eq!(defaulted["data"]["token"], "YWJj");
    assert!(defaulted.get("stringData").is_none());
    assert_eq!(
        fields("Secret", s),
        vec![pair("FieldValueInvalid", "data[pw]")]
    );
    let tls =
        json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}});
    assert_eq!(
        fields("Secret", tls),
        vec![pair("FieldValueRequired", "data[tls.key]")]
    );
    let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {}});
    let mut new = old.clone();
    new["data"]["k"] = json!("dg==");
    let c = validate("Secret", &new, Some(&old));
    assert_eq!(
        c.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec!["data"]
    );
}

#[test]
fn small_kinds() {
    let lease = json!({"metadata": {"name": "n1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 0}});
    assert_eq!(
        fields("Lease", lease),
        vec![pair("FieldValueInvalid", "spec.leaseDurationSeconds")]
    );
    let event = json!({"metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "other"}});
    assert_eq!(
        fields("Event", event),
        vec![pair("FieldValueInvalid", "involvedObject.namespace")]
    );
    let node_event = json!({"metadata": {"name": "n1.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"}});
    assert_eq!(fields("Event", node_event), vec![]);
    let node = json!({"metadata": {"name": "n1"}, "spec": {"podCIDRs": ["10.244.0.0/24"],
        "taints": [{"key": "x", "effect": "Sometimes"}]}});
    assert_eq!(
        fields("Node", node),
        vec![pair("FieldValueNotSupported", "spec.taints[0].effect")]
    );
    let sa = json!({"metadata": {"name": "default", "namespace": "default"}});
    assert_eq!(fields("ServiceAccount", sa), vec![]);
    let ns = json!({"metadata": {"name": "team-a"}});
    assert_eq!(fields("Namespace", ns), vec![]);
}
