//! OpenAPI with kubectl: `kubectl explain` reads the server's /openapi/v3 documents, and
//! kubectl's `--validate` (the `fieldValidation` parameter) refuses, warns about or drops
//! unknown and duplicate fields as upstream does.

use keelson_testing::Apiserver;

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kubectl_explain_describes_kinds_and_fields() {
    let s = Apiserver::start();
    let out = s.kubectl_ok(&["explain", "pod.spec.containers"]);
    assert!(
        out.contains("List of containers belonging to the pod"),
        "{out}"
    );
    for field in [
        "image\t<string>",
        "imagePullPolicy\t<string>",
        "ports\t<[]ContainerPort>",
    ] {
        assert!(out.contains(field), "{field} missing in:\n{out}");
    }
    let out = s.kubectl_ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        out.contains("rollingUpdate\t<RollingUpdateDeployment>"),
        "{out}"
    );
    let out = s.kubectl_ok(&["explain", "--api-version=apps/v1", "deployments"]);
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("VERSION:    v1"), "{out}");
    assert!(out.contains("GROUP:      apps"), "{out}");
}

#[test]
fn openapi_is_readable_by_any_authenticated_user() {
    let s = Apiserver::start();
    let kubeconfig = s.kubeconfig_for("someone", &[]);
    let out = std::process::Command::new("kubectl")
        .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["get", "--raw", "/openapi/v3"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let d: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let url = d["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    let (code, _) = s.curl("GET", "/openapi/v2", None, None, None);
    assert_eq!(code, 401, "anonymous users get no OpenAPI");
}

const POD_WITH_TYPO: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  foo: bar\n  containers: [{name: c, image: busybox}]\n";

#[test]
fn kubectl_validate_strict_warn_and_ignore() {
    let s = Apiserver::start();
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        &POD_WITH_TYPO.replace("NAME", "strict"),
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "Error from server (BadRequest): error when creating \"STDIN\": Pod in version \"v1\" \
             cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""
        ),
        "{stderr}"
    );
    assert!(!s.kubectl(&["get", "pod", "strict"]).status.success());

    let pod = POD_WITH_TYPO.replace("NAME", "warned");
    let out = s.kubectl_stdin(&["apply", "--validate=warn", "-f", "-"], &pod);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("pod/warned created"), "{stdout}");
    assert!(
        stderr.contains("Warning: unknown field \"spec.foo\""),
        "{stderr}"
    );
    // A second apply is a strategic merge patch, sent with fieldValidation=Strict.
    let clean = POD_WITH_TYPO
        .replace("NAME", "again")
        .replace("  foo: bar\n", "");
    s.apply(&clean);
    let labelled = clean.replace("spec:\n", "  labels: {tier: web}\nspec:\n");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &labelled);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("pod/again configured"), "{stdout}");
    let tier = s.kubectl_ok(&[
        "get",
        "pod",
        "again",
        "-o",
        "jsonpath={.metadata.labels.tier}",
    ]);
    assert_eq!(tier, "web");

    let pod = POD_WITH_TYPO.replace("NAME", "ignored");
    let out = s.kubectl_stdin(&["create", "--validate=false", "-f", "-"], &pod);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("unknown field"), "{stderr}");
}

#[test]
fn duplicate_fields_and_patches_are_checked() {
    let s = Apiserver::start();
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},"data":{"a":"1"}}"#;
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, out) = s.curl_admin(
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        None,
        Some(body),
    );
    assert_eq!(code, 400, "{out}");
    assert!(
        out.contains(r#"strict decoding error: duplicate field \"metadata.name\""#),
        "{out}"
    );
    let (code, out) = s.curl_admin("POST", path, None, Some(body));
    assert_eq!(code, 201, "Warn is the default: {out}");

    let merge = Some("application/merge-patch+json");
    let patch = r#"{"data":{"b":"2"},"extra":true}"#;
    let item = format!("{path}/dup?fieldValidation=Strict");
    let (code, out) = s.curl_admin("PATCH", &item, merge, Some(patch));
    assert_eq!(code, 422, "{out}");
    assert!(
        out.contains(r#"strict decoding error: unknown field \"extra\""#),
        "{out}"
    );
    let out = s.kubectl_ok(&[
        "patch",
        "configmap",
        "dup",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
}
