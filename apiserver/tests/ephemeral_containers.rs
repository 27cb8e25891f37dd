//! pods/ephemeralcontainers as `kubectl debug` (v1.32) uses it: discovered, patched with a
//! strategic merge patch that adds one container at a time, never changing or removing one,
//! checked by PodSecurity; and the 404 of a path the server does not serve carries details
//! (kubectl debug reads them). No agent runs here: kubectl only writes the Pod and returns.

use keelson_testing::Apiserver;
use serde_json::{json, Value};

/// A Pod `web` in `ns` with container `app` and init container `setup`.
fn pod(ns: &str, security: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n{security}  initContainers: [{{name: setup, image: busybox}}]\n  containers:\n  - name: app\n    image: nginx\n"
    )
}

/// `kubectl debug web` in `ns` adding container `name`; Ok(stderr) or Err(stderr).
fn debug(s: &Apiserver, ns: &str, name: &str, more: &[&str]) -> Result<String, String> {
    let mut args = vec![
        "-n",
        ns,
        "debug",
        "web",
        "--image=busybox",
        "--target=app",
        "-c",
        name,
    ];
    args.extend_from_slice(more);
    let out = s.kubectl(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(err)
    } else {
        Err(err)
    }
}

/// `kubectl patch pod web` with `args` that must fail; its stderr.
fn refused_patch(s: &Apiserver, args: &[&str]) -> String {
    let mut all = vec!["patch", "pod", "web"];
    all.extend_from_slice(args);
    let out = s.kubectl(&all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was accepted");
    err
}

fn ephemeral_names(s: &Apiserver, ns: &str) -> String {
    let path = "{range .spec.ephemeralContainers[*]}{.name}>{.targetContainerName} {end}";
    s.jsonpath_ok(&["-n", ns, "pod", "web"], path)
        .trim()
        .to_string()
}

#[test]
fn kubectl_debug_adds_ephemeral_containers_one_after_another() {
    let s = Apiserver::start();
    s.apply(&pod("default", ""));
    let list: Value = serde_json::from_str(&s.kubectl_ok(&["get", "--raw", "/api/v1"])).unwrap();
    let entry = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .expect("pods/ephemeralcontainers in discovery");
    assert_eq!(entry["kind"], "Pod");
    assert_eq!(entry["verbs"], json!(["get", "patch", "update"]));

    debug(&s, "default", "dbg", &[]).unwrap();
    assert_eq!(ephemeral_names(&s, "default"), "dbg>app");
    debug(&s, "default", "dbg2", &["--attach=false"]).unwrap();
    assert_eq!(ephemeral_names(&s, "default"), "dbg>app dbg2>app");
    let stored: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    let first = &stored["spec"]["ephemeralContainers"][0];
    assert_eq!(first["image"], "busybox");
    assert_eq!(first["terminationMessagePolicy"], "File");
    assert_eq!(
        first["imagePullPolicy"], "Always",
        "defaulted as a container"
    );

    // GET of the subresource is the whole Pod, as upstream since 1.22.
    let path = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";
    let got: Value = serde_json::from_str(&s.kubectl_ok(&["get", "--raw", path])).unwrap();
    assert_eq!(got["kind"], "Pod");
    assert_eq!(got["spec"], stored["spec"]);

    // A container's or init container's name is taken. (Reusing an ephemeral container's
    // name makes kubectl patch that container with what it already has: a no-op, as upstream.)
    for taken in ["app", "setup"] {
        let err = debug(&s, "default", taken, &[]).unwrap_err();
        assert!(err.contains("Duplicate value"), "{taken}: {err}");
        assert!(err.contains("spec.ephemeralContainers[2].name"), "{err}");
    }
}

#[test]
fn ephemeral_containers_are_never_changed_removed_or_given_the_pods_work() {
    let s = Apiserver::start();
    s.apply(&pod("default", ""));
    debug(&s, "default", "dbg", &[]).unwrap();
    debug(&s, "default", "dbg2", &[]).unwrap();
    let sub = "--subresource=ephemeralcontainers";

    let change =
        r#"[{"op":"replace","path":"/spec/ephemeralContainers/0/image","value":"alpine"}]"#;
    let err = refused_patch(&s, &[sub, "--type=json", "-p", change]);
    assert!(
        err.contains(r#"The Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may not be changed"#),
        "{err}"
    );
    let remove = r#"[{"op":"remove","path":"/spec/ephemeralContainers/1"}]"#;
    let err = refused_patch(&s, &[sub, "--type=json", "-p", remove]);
    assert!(
        err.contains(r#"spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg2" may not be removed"#),
        "{err}"
    );
    // Through the Pod itself, the spec is immutable: ephemeral containers included.
    let err = refused_patch(&s, &["--type=json", "-p", change]);
    assert!(
        err.contains("spec: Forbidden: pod updates may not change fields"),
        "{err}"
    );

    let busy = r#"{"spec":{"$setElementOrder/ephemeralContainers":[{"name":"dbg"},{"name":"dbg2"},{"name":"bad"}],
        "ephemeralContainers":[{"name":"bad","image":"busybox","targetContainerName":"nope",
        "ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]}}"#;
    let err = refused_patch(&s, &[sub, "--type=strategic", "-p", busy]);
    for want in [
        r#"spec.ephemeralContainers[2].targetContainerName: Not found: "nope""#,
        "spec.ephemeralContainers[2].ports: Forbidden: cannot be set for an Ephemeral Container",
        "spec.ephemeralContainers[2].resources: Forbidden: cannot be set for an Ephemeral Container",
    ] {
        assert!(err.contains(want), "missing {want}: {err}");
    }
    let probe = r#"{"spec":{"ephemeralContainers":[{"name":"p","image":"busybox",
        "readinessProbe":{"exec":{"command":["true"]}}}]}}"#;
    let err = refused_patch(&s, &[sub, "--type=merge", "-p", probe]);
    assert!(err.contains("spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container"), "{err}");
    assert_eq!(ephemeral_names(&s, "default"), "dbg>app dbg2>app");

    // Never on create.
    let created = "apiVersion: v1\nkind: Pod\nmetadata: {name: born, namespace: default}\nspec:\n  containers: [{name: app, image: nginx}]\n  ephemeralContainers: [{name: dbg, image: busybox}]\n";
    let out = s.kubectl_stdin(&["create", "-f", "-"], created);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(r#"The Pod "born" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"#),
        "{err}"
    );
}

#[test]
fn a_write_takes_only_the_ephemeral_list_with_preconditions_and_dry_run() {
    let s = Apiserver::start();
    s.apply(&pod("default", ""));
    let path = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";
    let mut body: Value = serde_json::from_str(&s.kubectl_ok(&["get", "--raw", path])).unwrap();
    body["metadata"]["labels"] = json!({"sneaky": "yes"});
    body["spec"]["containers"][0]["image"] = json!("evil");
    body["spec"]["ephemeralContainers"] = json!([{"name": "put", "image": "busybox"}]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, body.to_string()).unwrap();
    let put = ["replace", "--raw", path, "-f", file.to_str().unwrap()];
    let written: Value = serde_json::from_str(&s.kubectl_ok(&put)).unwrap();
    assert_eq!(written["spec"]["ephemeralContainers"][0]["name"], "put");
    assert_eq!(written["spec"]["containers"][0]["image"], "nginx");
    assert!(written["metadata"].get("labels").is_none(), "{written}");

    // The resourceVersion read before that write is stale now.
    let out = s.kubectl(&put);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("Conflict"), "{err}");

    let add = r#"{"spec":{"ephemeralContainers":[{"name":"dry","image":"busybox"}]}}"#;
    let dry = s.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "--subresource=ephemeralcontainers",
        "--dry-run=server",
        "-p",
        add,
        "-o",
        "jsonpath={.spec.ephemeralContainers[*].name}",
    ]);
    assert_eq!(dry, "dry put");
    assert_eq!(ephemeral_names(&s, "default"), "put>");
}

#[test]
fn podsecurity_checks_what_kubectl_debug_adds() {
    let s = Apiserver::start();
    s.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: locked\n  labels: {pod-security.kubernetes.io/enforce: restricted}\n");
    let restricted =
        "  securityContext:\n    runAsNonRoot: true\n    seccompProfile: {type: RuntimeDefault}\n";
    let compliant = pod("locked", restricted).replace(
        "    image: nginx\n",
        "    image: nginx\n    securityContext:\n      allowPrivilegeEscalation: false\n      capabilities: {drop: [ALL]}\n",
    );
    let compliant = compliant.replace(
        "initContainers: [{name: setup, image: busybox}]",
        "initContainers: [{name: setup, image: busybox, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]",
    );
    s.apply(&compliant);
    let err = debug(&s, "locked", "root", &["--profile=sysadmin"]).unwrap_err();
    let want = r#"pods "web" is forbidden: violates PodSecurity "restricted:latest": privileged (container "root" must not set securityContext.privileged=true)"#;
    assert!(err.contains(want), "{err}");
    assert!(err.contains("Error from server (Forbidden)"), "{err}");
    debug(&s, "locked", "ok", &["--profile=restricted"]).unwrap();
    assert_eq!(ephemeral_names(&s, "locked"), "ok>app");

    // The warn level warns about the container a write adds, and lets it in.
    s.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: watched\n  labels: {pod-security.kubernetes.io/warn: baseline}\n");
    s.apply(&pod("watched", ""));
    let warned = debug(&s, "watched", "root", &["--profile=sysadmin"]).unwrap();
    let want = r#"Warning: would violate PodSecurity "baseline:latest": privileged (container "root" must not set securityContext.privileged=true)"#;
    assert!(warned.contains(want), "{warned}");
    assert_eq!(ephemeral_names(&s, "watched"), "root>app");
}

#[test]
fn an_unserved_path_answers_a_not_found_status_with_details() {
    let s = Apiserver::start();
    for path in [
        "/api/v1/namespaces/x/pods/nope/unknownsub",
        "/apis/nope.example.com/v1/widgets",
        "/api/v1/widgets",
    ] {
        let (code, body) = s.curl_admin("GET", path, None, None);
        assert_eq!(code, 404, "{path}: {body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["details"], json!({}), "{path}");
        let out = s.kubectl(&["get", "--raw", path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("Error from server (NotFound)"), "{err}");
    }
    // A missing pod's subresource names the pod; kubectl debug says so instead of panicking.
    let out = s.kubectl(&["debug", "ghost", "--image=busybox", "-c", "dbg"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(r#"pods "ghost" not found"#), "{err}");
    assert!(!err.contains("panic"), "{err}");
}
