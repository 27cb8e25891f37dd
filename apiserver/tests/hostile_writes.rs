//! Writes a hostile or careless client might send. Each gets upstream's status; nothing a typed
//! client cannot decode is stored; every kind still lists and describes; and the server starts
//! again after kill -9 with every acknowledged object.

use keelson_testing::Apiserver;
use serde_json::{json, Value};

const NS: &str = "/api/v1/namespaces/default";
const APPS: &str = "/apis/apps/v1/namespaces/default";
const MERGE: Option<&str> = Some("application/merge-patch+json");
const JSON_PATCH: Option<&str> = Some("application/json-patch+json");
const STRATEGIC: Option<&str> = Some("application/strategic-merge-patch+json");

/// The Status of a refused request, after checking its code and reason.
fn refused(got: (u16, String), code: u16, reason: &str) -> Value {
    let (got_code, body) = got;
    assert_eq!(got_code, code, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(status["kind"], "Status", "{body}");
    assert_eq!(status["reason"], reason, "{body}");
    status
}

/// A body with a wrong JSON type: 400 as upstream, naming the field.
fn type_error(got: (u16, String), field: &str) -> Value {
    let st = refused(got, 400, "BadRequest");
    assert_eq!(cause(&st), ("FieldValueTypeInvalid".into(), field.into()));
    st
}

/// A patch whose result is invalid: 422 as upstream.
fn invalid_patch(s: &Apiserver, path: &str, ct: Option<&str>, body: &str) -> Value {
    refused(s.curl_admin("PATCH", path, ct, Some(body)), 422, "Invalid")
}

/// The first cause's (reason, field).
fn cause(status: &Value) -> (String, String) {
    let c = &status["details"]["causes"][0];
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (text("reason"), text("field"))
}

fn created(s: &Apiserver, path: &str, body: &Value) {
    let (code, text) = post(s, path, body);
    assert_eq!(code, 201, "{text}");
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// The invariants after hostile writes: every kind lists as JSON that its k8s-openapi type
/// decodes and describes; after kill -9 the server starts and lists exactly `names` per kind.
fn still_readable(s: &mut Apiserver, expected: &[(&str, &[&str])]) {
    let check = |s: &Apiserver| {
        for (kind, names) in expected {
            let list: Value =
                serde_json::from_str(&s.kubectl_ok(&["get", kind, "-A", "-o", "json"]))
                    .unwrap_or_else(|e| panic!("{kind}: {e}"));
            decodes(kind, &list);
            let mut got: Vec<&str> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                // The server's own kube-public/cluster-info is not one of the test's objects.
                .filter(|i| i["metadata"]["namespace"] != "kube-public")
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect();
            got.sort();
            assert_eq!(&got, names, "{kind}");
            let out = s.kubectl(&["describe", kind, "-A"]);
            assert!(out.status.success(), "describe {kind}: {:?}", out);
        }
    };
    check(s);
    s.kill9();
    s.start_again();
    check(s);
}

fn decodes(kind: &str, list: &Value) {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core, discovery::v1 as discovery};
    // `kubectl get -A -o json` wraps the items in a plain List; each item is the typed object.
    let l = list["items"].clone();
    let r = match kind {
        "configmaps" => serde_json::from_value::<Vec<core::ConfigMap>>(l).map(drop),
        "deployments" => serde_json::from_value::<Vec<apps::Deployment>>(l).map(drop),
        "pods" => serde_json::from_value::<Vec<core::Pod>>(l).map(drop),
        "nodes" => serde_json::from_value::<Vec<core::Node>>(l).map(drop),
        "services" => serde_json::from_value::<Vec<core::Service>>(l).map(drop),
        "endpointslices" => serde_json::from_value::<Vec<discovery::EndpointSlice>>(l).map(drop),
        // Custom objects: any JSON object with a name.
        "blobs" => match l
            .as_array()
            .is_some_and(|a| a.iter().all(|i| i["metadata"]["name"].is_string()))
        {
            true => Ok(()),
            false => panic!("blobs list: {l}"),
        },
        other => panic!("no typed list for {other}"),
    };
    r.unwrap_or_else(|e| panic!("{kind} list does not decode: {e}"));
}

#[test]
fn wrong_json_types_are_refused_on_every_write_path() {
    let mut s = Apiserver::start();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "n", "annotations": {"a": 1}}});
    let st = type_error(
        post(&s, &format!("{NS}/configmaps"), &cm),
        "metadata.annotations.a",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"),
        "{st}"
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": "app=x"}});
    let st = refused(
        post(&s, &format!("{NS}/configmaps"), &cm),
        400,
        "BadRequest",
    );
    assert_eq!(cause(&st).1, "metadata.labels");
    created(
        &s,
        &format!("{NS}/configmaps"),
        &json!({"metadata": {"name": "ok"}, "data": {"k": "v"}}),
    );
    let st = invalid_patch(
        &s,
        &format!("{NS}/configmaps/ok"),
        MERGE,
        r#"{"data":{"k":7}}"#,
    );
    assert_eq!(
        cause(&st),
        ("FieldValueTypeInvalid".into(), "data.k".into())
    );
    let put = json!({"metadata": {"name": "ok"}, "data": {"k": ["v"]}});
    refused(
        s.curl_admin(
            "PUT",
            &format!("{NS}/configmaps/ok"),
            None,
            Some(&put.to_string()),
        ),
        400,
        "BadRequest",
    );

    let mut big = deployment("big");
    big["spec"]["replicas"] = json!(3_000_000_000u64);
    type_error(
        post(&s, &format!("{APPS}/deployments"), &big),
        "spec.replicas",
    );
    created(&s, &format!("{APPS}/deployments"), &deployment("web"));
    let web = format!("{APPS}/deployments/web");
    let st = invalid_patch(&s, &web, STRATEGIC, r#"{"spec":{"replicas":4294967296}}"#);
    assert_eq!(cause(&st).1, "spec.replicas");
    let st = invalid_patch(
        &s,
        &format!("{web}/status"),
        MERGE,
        r#"{"status":{"replicas":"x"}}"#,
    );
    assert_eq!(cause(&st).1, "status.replicas");
    let mut status = deployment("web");
    status["status"] = json!({"conditions": "Available"});
    refused(
        s.curl_admin(
            "PUT",
            &format!("{web}/status"),
            None,
            Some(&status.to_string()),
        ),
        400,
        "BadRequest",
    );
    let st = invalid_patch(
        &s,
        &format!("{web}/scale"),
        MERGE,
        r#"{"spec":{"replicas":3000000000}}"#,
    );
    assert_eq!(cause(&st).1, "spec.replicas");
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": "2"}});
    refused(
        s.curl_admin(
            "PUT",
            &format!("{web}/scale"),
            None,
            Some(&scale.to_string()),
        ),
        400,
        "BadRequest",
    );

    still_readable(
        &mut s,
        &[("configmaps", &["ok"][..]), ("deployments", &["web"][..])],
    );
}

fn post(s: &Apiserver, path: &str, body: &Value) -> (u16, String) {
    curl_file(s, "POST", path, None, &body.to_string())
}

/// A request whose body is too long for a command line goes through a file.
fn curl_file(
    s: &Apiserver,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: &str,
) -> (u16, String) {
    let file = s
        .dir
        .path()
        .join(format!("body-{}.json", keelson_testing::random_suffix()));
    std::fs::write(&file, body).expect("write the request body");
    let got = s.curl_admin(method, path, ct, Some(&format!("@{}", file.display())));
    let _ = std::fs::remove_file(&file);
    got
}

fn nested(levels: usize) -> Value {
    (0..levels).fold(json!("x"), |v, _| json!({ "n": v }))
}

/// A custom kind whose objects take any fields: where the size and depth limits are met by
/// what a client sends (a built-in kind drops fields its schema does not declare).
const BLOBS_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: blobs.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: blobs, kind: Blob}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
const BLOBS: &str = "/apis/example.com/v1/namespaces/default/blobs";

#[test]
fn limits_hold_after_patching() {
    let mut s = Apiserver::start();
    let cms = format!("{NS}/configmaps");
    s.apply(BLOBS_CRD);
    s.kubectl_ok(&[
        "wait",
        "--for=condition=established",
        "crd/blobs.example.com",
    ]);
    // The object limit holds for any field.
    let huge = json!({"metadata": {"name": "huge"}, "extra": "x".repeat(2_000_000)});
    refused(
        curl_file(&s, "POST", BLOBS, None, &huge.to_string()),
        413,
        "RequestEntityTooLarge",
    );
    let body = json!({"metadata": {"name": "body"}, "extra": "x".repeat(3_200_000)});
    refused(post(&s, BLOBS, &body), 413, "RequestEntityTooLarge");
    let deep_body = json!({"metadata": {"name": "deep"}, "extra": nested(200)});
    refused(post(&s, BLOBS, &deep_body), 400, "BadRequest");
    let deep_body = json!({"metadata": {"name": "deep"}, "extra": nested(110)});
    let st = refused(post(&s, BLOBS, &deep_body), 422, "Invalid");
    assert_eq!(cause(&st).0, "FieldValueForbidden");
    let half = "x".repeat(900_000);
    created(&s, BLOBS, &json!({"metadata": {"name": "grow"}, "a": half}));
    let grow = format!("{BLOBS}/grow");
    let more = json!({"extra": half}).to_string();
    refused(
        curl_file(&s, "PATCH", &grow, MERGE, &more),
        413,
        "RequestEntityTooLarge",
    );

    // A dozen copies of a 400 kB value in a small body: upstream's accumulated copy limit.
    let cp = json!({"metadata": {"name": "cp"}, "data": {"a": "y".repeat(400_000)}});
    created(&s, &cms, &cp);
    let copies: Vec<Value> = (0..12)
        .map(|i| json!({"op": "copy", "from": "/data/a", "path": format!("/data/c{i}")}))
        .collect();
    let path = format!("{cms}/cp");
    let body = json!(copies).to_string();
    refused(
        s.curl_admin("PATCH", &path, JSON_PATCH, Some(&body)),
        413,
        "RequestEntityTooLarge",
    );
    let many = vec![json!({"op": "test", "path": "/metadata/name", "value": "cp"}); 10_001];
    let st = refused(
        curl_file(&s, "PATCH", &path, JSON_PATCH, &json!(many).to_string()),
        413,
        "RequestEntityTooLarge",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap_or("")
            .contains("maximum operations in a JSON patch is 10000"),
        "{st}"
    );

    // Nesting: a JSON patch copying a field into itself, and a deep merge patch.
    let mut deepen = vec![json!({"op": "add", "path": "/extra", "value": {"n": 1}})];
    deepen.extend((0..150).map(|_| json!({"op": "copy", "from": "/extra", "path": "/extra/n"})));
    invalid_patch(&s, &grow, JSON_PATCH, &json!(deepen).to_string());
    let deep = json!({"extra": nested(110)}).to_string();
    let st = invalid_patch(&s, &grow, MERGE, &deep);
    assert_eq!(cause(&st).0, "FieldValueForbidden");
    let shallow = json!({"extra": nested(20)}).to_string();
    assert_eq!(s.curl_admin("PATCH", &grow, MERGE, Some(&shallow)).0, 200);

    still_readable(
        &mut s,
        &[("configmaps", &["cp"][..]), ("blobs", &["grow"][..])],
    );
}

fn pod(name: &str, container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [container], "volumes": [{"name": "scratch", "emptyDir": {}}]}})
}

fn slice(name: &str, endpoints: Value) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "port": 80}]})
}

#[test]
fn fields_node_components_act_on_are_validated() {
    let mut s = Apiserver::start();
    let pods = format!("{NS}/pods");
    let c = json!({"name": "c", "image": "busybox",
        "volumeMounts": [{"name": "scratch", "mountPath": "/mnt", "subPath": "/"}]});
    let st = refused(post(&s, &pods, &pod("root", c)), 422, "Invalid");
    assert_eq!(
        cause(&st),
        (
            "FieldValueInvalid".into(),
            "spec.containers[0].volumeMounts[0].subPath".into()
        )
    );
    let c = json!({"name": "c", "image": "busybox",
        "livenessProbe": {"httpGet": {"port": 80, "path": "/h\r\nGET /admin HTTP/1.1"}}});
    let st = refused(post(&s, &pods, &pod("probe", c)), 422, "Invalid");
    assert_eq!(
        cause(&st).1,
        "spec.containers[0].livenessProbe.httpGet.path"
    );
    created(
        &s,
        &pods,
        &pod("ok", json!({"name": "c", "image": "busybox"})),
    );
    let sub = r#"{"spec":{"containers":[{"name":"c","volumeMounts":[{"name":"scratch","mountPath":"/m","subPath":"../.."}]}]}}"#;
    invalid_patch(&s, &format!("{pods}/ok"), STRATEGIC, sub);

    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    for (i, ip) in [
        "127.0.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "::ffff:127.0.0.1",
    ]
    .iter()
    .enumerate()
    {
        let body = slice(&format!("bad-{i}"), json!([{"addresses": [ip]}]));
        let st = refused(post(&s, slices, &body), 422, "Invalid");
        assert_eq!(cause(&st).1, "endpoints[0].addresses[0]", "{ip}");
    }
    let many: Vec<Value> = (0..20_000)
        .map(|i| json!({"addresses": [format!("10.{}.{}.{}", i / 62500, i / 250 % 250, i % 250 + 1)]}))
        .collect();
    let st = refused(
        curl_file(
            &s,
            "POST",
            slices,
            None,
            &slice("huge", json!(many)).to_string(),
        ),
        422,
        "Invalid",
    );
    assert_eq!(cause(&st), ("FieldValueTooMany".into(), "endpoints".into()));
    created(
        &s,
        slices,
        &slice("web-1", json!([{"addresses": ["10.244.1.5"]}])),
    );
    let to_metadata =
        r#"[{"op":"replace","path":"/endpoints/0/addresses/0","value":"169.254.169.254"}]"#;
    invalid_patch(&s, &format!("{slices}/web-1"), JSON_PATCH, to_metadata);

    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"podCIDR": "0.0.0.0/0", "podCIDRs": ["0.0.0.0/0"]}});
    let st = refused(post(&s, "/api/v1/nodes", &node), 422, "Invalid");
    assert_eq!(cause(&st).1, "spec.podCIDR");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}});
    created(&s, "/api/v1/nodes", &node);
    let default_route = r#"{"spec":{"podCIDRs":["10.244.1.0/24","::/0"]}}"#;
    invalid_patch(&s, "/api/v1/nodes/n1", MERGE, default_route);

    still_readable(
        &mut s,
        &[
            ("pods", &["ok"][..]),
            ("endpointslices", &["web-1"][..]),
            ("nodes", &["n1"][..]),
        ],
    );
}
