//! CustomResourceDefinitions against a real keelson-apiserver, driven by kubectl: a definition
//! with two versions serves its kind at once (discovery, short name, category); its schema
//! prunes unknown fields, fills defaults and refuses invalid objects with upstream's messages;
//! printer columns, the status and scale subresources, the other version, and deleting the
//! definition with its objects.

use keelson_testing::{eventually, Apiserver};
use std::time::Duration;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [toys]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - {rule: "self.color != 'blue' || self.size >= 2", message: "blue widgets are at least 2"}
            - {rule: "self.size >= oldSelf.size", message: "widgets do not shrink"}
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, enum: [red, blue], default: red}
              replicas: {type: integer, default: 1}
              port: {x-kubernetes-int-or-string: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              replicas: {type: integer}
              conditions:
                type: array
                items:
                  type: object
                  properties: {type: {type: string}, status: {type: string}}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn widget(name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec: {spec}\n")
}

/// Applies the CustomResourceDefinition `crd` named `name` and waits until it is established.
fn define(s: &Apiserver, crd: &str, name: &str) {
    s.apply(crd);
    let crd = format!("crd/{name}");
    s.kubectl_ok(&["wait", "--for=condition=established", &crd, "--timeout=20s"]);
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_definition_serves_its_kind_with_its_schema() {
    let s = Apiserver::start();
    define(&s, CRD, "widgets.example.com");
    // kubectl explain reads the definition's schema from /openapi/v3.
    let explained = s.kubectl_ok(&["explain", "widget.spec"]);
    for field in ["size", "color", "replicas", "<integer> -required-"] {
        assert!(
            explained.contains(field),
            "{field} missing in:\n{explained}"
        );
    }
    // fieldValidation=Strict (kubectl's default) refuses unknown fields as upstream.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &widget("strict", "{size: 3, bogus: 1}"),
    );
    let err = stderr(&out);
    assert!(
        err.contains(r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.bogus""#),
        "{err}"
    );
    // Unknown fields are pruned (kubectl's own strict check off), defaults filled in.
    let out = s.kubectl_stdin(
        &["create", "--validate=false", "-f", "-"],
        &widget(
            "w1",
            "{size: 3, bogus: 1, port: http, extra: {free: [1, 2]}}",
        ),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // w1's fields, read and written as kubectl users do.
    let w1 = |path: &str| s.jsonpath_ok(&["widget", "w1"], path);
    let patch_w1 = |args: &[&str]| s.kubectl_ok(&[&["patch", "widget", "w1"], args].concat());
    let spec = w1("{.spec}");
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({"size": 3, "color": "red", "replicas": 1, "port": "http", "extra": {"free": [1, 2]}})
    );
    // Invalid objects are refused with the schema's reasons.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &widget("bad", "{size: 11, color: pink}"),
    );
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains(r#"The Widget "bad" is invalid"#), "{err}");
    assert!(
        err.contains(r#"spec.color: Unsupported value: "pink": supported values: "red", "blue""#),
        "{err}"
    );
    assert!(
        err.contains(
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
        ),
        "{err}"
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &widget("nosize", "{color: blue}"));
    assert!(
        stderr(&out).contains("spec.size: Required value"),
        "{}",
        stderr(&out)
    );
    // CEL rules (x-kubernetes-validations), and a transition rule against the stored object.
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &widget("tiny", "{size: 1, color: blue}"),
    );
    let err = stderr(&out);
    assert!(
        err.contains(r#"spec: Invalid value: "object": blue widgets are at least 2"#),
        "{err}"
    );
    let out = s.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":2}}"#,
    ]);
    let err = stderr(&out);
    assert!(
        err.contains(r#"spec: Invalid value: "object": widgets do not shrink"#),
        "{err}"
    );
    // Printer columns, the short name and the category.
    let row = s.kubectl_ok(&["get", "wd", "w1"]);
    let head: Vec<&str> = row
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(head, ["NAME", "SIZE", "COLOR", "READY"], "{row}");
    assert!(
        row.lines()
            .nth(1)
            .unwrap_or("")
            .split_whitespace()
            .eq(["w1", "3", "red"]),
        "{row}"
    );
    assert!(s
        .kubectl_ok(&["get", "toys", "-o", "name"])
        .contains("widget.example.com/w1"));
    // The status subresource: written only there, and shown by its column.
    patch_w1(&[
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":1,"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    patch_w1(&["--type=merge", "-p", r#"{"status":{"replicas":9}}"#]);
    assert_eq!(w1("{.status.replicas}"), "1");
    assert!(s
        .kubectl_ok(&["get", "widget", "w1", "--no-headers"])
        .contains("True"));
    // The scale subresource.
    s.kubectl_ok(&["scale", "widget", "w1", "--replicas=4"]);
    assert_eq!(w1("{.spec.replicas}"), "4");
    // The other version serves the same object.
    let beta = s.jsonpath_ok(
        &["widgets.v1beta1.example.com", "w1"],
        "{.apiVersion} {.spec.size}",
    );
    assert_eq!(beta, "example.com/v1beta1 3");
    // A watch through the other version sees the object in that version.
    let (code, body) = s.curl_admin(
        "GET",
        "/apis/example.com/v1beta1/namespaces/default/widgets?watch=1&timeoutSeconds=1",
        None,
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(r#""type":"ADDED""#)
            && body.contains(r#""apiVersion":"example.com/v1beta1""#),
        "{body}"
    );
    assert!(!body.contains(r#""apiVersion":"example.com/v1""#), "{body}");
    // A merge patch through the other version changes the one object.
    s.kubectl_ok(&[
        "patch",
        "widgets.v1beta1.example.com",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ]);
    assert_eq!(w1("{.spec.color}"), "blue");
    // Strategic merge needs Go struct tags: refused as upstream.
    let out = s.kubectl(&[
        "patch",
        "widget",
        "w1",
        "--type=strategic",
        "-p",
        r#"{"spec":{"size":2}}"#,
    ]);
    assert!(!out.status.success(), "strategic merge patch applied");
    // kubectl edit's merge and JSON patches work.
    patch_w1(&[
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/size","value":5}]"#,
    ]);
    assert_eq!(w1("{.spec.size}"), "5");
    // Deleting the definition deletes its objects.
    s.kubectl_ok(&["delete", "crd", "widgets.example.com"]);
    define(&s, CRD, "widgets.example.com");
    eventually("widgets served again", Duration::from_secs(10), || {
        let out = s.kubectl(&["get", "widgets", "-o", "name"]);
        match (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        ) {
            (true, true) => Ok(()),
            _ => Err(format!("{out:?}")),
        }
    });
}

#[test]
fn definitions_are_checked() {
    let s = Apiserver::start();
    let bad = CRD.replace("name: widgets.example.com", "name: gadgets.example.com");
    let out = s.kubectl_stdin(&["create", "-f", "-"], &bad);
    assert!(
        stderr(&out).contains("must be spec.names.plural+\".\"+spec.group"),
        "{}",
        stderr(&out)
    );
    let two_storage = CRD.replace("storage: false", "storage: true");
    let out = s.kubectl_stdin(&["create", "-f", "-"], &two_storage);
    assert!(
        stderr(&out).contains("must have exactly one version marked as storage version"),
        "{}",
        stderr(&out)
    );
    let untyped = CRD.replace(
        "color: {type: string, enum: [red, blue], default: red}",
        "color: {enum: [red, blue]}",
    );
    let out = s.kubectl_stdin(&["create", "-f", "-"], &untyped);
    assert!(
        stderr(&out).contains("properties[color].type: Required value"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn cluster_scoped_kinds_and_server_side_apply() {
    let s = Apiserver::start();
    define(
        &s,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: regions.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names: {plural: regions, kind: Region}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {type: object, properties: {zones: {type: array, items: {type: string}}}}\n",
        "regions.example.com",
    );
    let region =
        "apiVersion: example.com/v1\nkind: Region\nmetadata:\n  name: eu\nspec: {zones: [a, b]}\n";
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], region);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = region.replace("[a, b]", "[a, b, c]");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &again);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.kubectl_ok(&["get", "region", "eu", "-o", "jsonpath={.spec.zones}"]),
        r#"["a","b","c"]"#
    );
    // Cluster-scoped: no namespace in its path or its object.
    let (code, body) = s.curl_admin("GET", "/apis/example.com/v1/regions/eu", None, None);
    assert_eq!(code, 200, "{body}");
    assert!(!body.contains("\"namespace\""), "{body}");
}
