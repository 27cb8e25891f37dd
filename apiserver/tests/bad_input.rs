//! Bad requests get the right Status code and a message naming the problem, and store nothing.

use keelson_testing::Apiserver;

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn names(s: &Apiserver, kind: &str) -> String {
    s.kubectl_ok(&["get", kind, "-o", "name"])
}

#[test]
fn malformed_json_and_yaml_are_400() {
    let s = Apiserver::start();
    let (code, body) = s.curl_admin(
        "POST",
        CM,
        Some("application/json"),
        Some("{\"metadata\": {\"name\": \"x\""),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("\"kind\":\"Status\"") && body.contains("json parse error"),
        "{body}"
    );
    let (code, body) = s.curl_admin(
        "POST",
        CM,
        Some("application/yaml"),
        Some("metadata:\n  name: [x\n"),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("YAML"), "{body}");
    let (code, _) = s.curl_admin(
        "POST",
        CM,
        Some("application/yaml"),
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n"),
    );
    assert_eq!(code, 201);
    assert_eq!(names(&s, "configmaps"), "configmap/fine\n");
}

#[test]
fn invalid_objects_are_422_naming_the_fields() {
    let s = Apiserver::start();
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nosel}\nspec:\n  template:\n    metadata: {labels: {app: x}}\n    spec:\n      containers: [{name: c, image: busybox}]\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], deploy);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Deployment \"nosel\" is invalid")
            && err.contains("spec.selector: Required value"),
        "{err}"
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: empty}\nspec:\n  containers: []\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], pod);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Pod \"empty\" is invalid") && err.contains("spec.containers: Required value"),
        "{err}"
    );
    let (code, body) = s.curl_admin("POST", "/api/v1/namespaces/default/pods", None, Some(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{"containers":[]}}"#));
    assert_eq!(code, 422);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.containers");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    assert_eq!(names(&s, "deployments"), "");
    assert_eq!(names(&s, "pods"), "");
}

#[test]
fn unknown_resources_are_404() {
    let s = Apiserver::start();
    let (code, body) = s.curl_admin("GET", "/api/v1/widgets", None, None);
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("\"reason\":\"NotFound\""), "{body}");
    let (code, _) = s.curl_admin(
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/nope",
        None,
        None,
    );
    assert_eq!(code, 404);
    let err = s.kubectl_cmd().run(&["get", "widgets"]).unwrap_err();
    assert!(
        err.contains("the server doesn't have a resource type \"widgets\""),
        "{err}"
    );
    let err = s.kubectl_cmd().run(&["get", "pod", "nope"]).unwrap_err();
    assert!(err.contains("pods \"nope\" not found"), "{err}");
}

#[test]
fn missing_or_wrong_tokens_are_401_and_write_nothing() {
    let s = Apiserver::start();
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sneaky"}}"#;
    let (code, text) = s.curl(
        "POST",
        CM,
        Some("application/json"),
        Some(body),
        Some("wrong-token"),
    );
    assert_eq!(code, 401, "{text:?}");
    let (code, _) = s.curl("POST", CM, Some("application/json"), Some(body), None);
    assert_eq!(code, 401);
    let (code, _) = s.curl("GET", CM, None, None, None);
    assert_eq!(code, 401);
    assert_eq!(names(&s, "configmaps"), "");
    // Tokens from --token-auth-file work too.
    drop(s);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, "ops-token,ops,1001,\"system:masters\"\n").unwrap();
    let s = Apiserver::start_with(&["--token-auth-file", file.to_str().unwrap()]);
    let (code, _) = s.curl(
        "POST",
        CM,
        Some("application/json"),
        Some(body),
        Some("ops-token"),
    );
    assert_eq!(code, 201);
}

#[test]
fn stale_resource_version_put_is_409() {
    let s = Apiserver::start();
    let (code, created) = s.curl_admin(
        "POST",
        CM,
        None,
        Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#),
    );
    assert_eq!(code, 201);
    let mut obj: serde_json::Value = serde_json::from_str(&created).unwrap();
    let stale = obj.clone();
    obj["data"]["a"] = "2".into();
    let (code, _) = s.curl_admin("PUT", &format!("{CM}/c"), None, Some(&obj.to_string()));
    assert_eq!(code, 200);
    let mut stale = stale;
    stale["data"]["a"] = "3".into();
    let (code, body) = s.curl_admin("PUT", &format!("{CM}/c"), None, Some(&stale.to_string()));
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("the object has been modified"), "{body}");
    assert_eq!(
        s.kubectl_ok(&["get", "cm", "c", "-o", "jsonpath={.data.a}"]),
        "2"
    );
    // Creating an existing name is 409 AlreadyExists.
    let (code, body) = s.curl_admin(
        "POST",
        CM,
        None,
        Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#),
    );
    assert_eq!(code, 409);
    assert!(body.contains("AlreadyExists"), "{body}");
}

#[test]
fn no_op_writes_keep_the_resource_version() {
    let s = Apiserver::start();
    let (_, created) = s.curl_admin(
        "POST",
        CM,
        None,
        Some(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#),
    );
    let obj: serde_json::Value = serde_json::from_str(&created).unwrap();
    let rv = obj["metadata"]["resourceVersion"].clone();
    let (code, same) = s.curl_admin(
        "PATCH",
        &format!("{CM}/c"),
        Some("application/merge-patch+json"),
        Some(r#"{"data":{"a":"1"}}"#),
    );
    assert_eq!(code, 200);
    let same: serde_json::Value = serde_json::from_str(&same).unwrap();
    assert_eq!(same["metadata"]["resourceVersion"], rv);
    let (code, changed) = s.curl_admin(
        "PATCH",
        &format!("{CM}/c"),
        Some("application/json-patch+json"),
        Some(r#"[{"op":"replace","path":"/data/a","value":"2"}]"#),
    );
    assert_eq!(code, 200);
    let changed: serde_json::Value = serde_json::from_str(&changed).unwrap();
    assert_ne!(changed["metadata"]["resourceVersion"], rv);
    assert_eq!(changed["data"]["a"], "2");
}
