//! Service accounts against a real keelson-apiserver with kubectl: tokens from `kubectl create
//! token` authenticate as the account (and stop when they expire, or when the pod or account
//! they are bound to is gone), TokenReview answers for them, pods get the projected token
//! volume as upstream mounts it, and the `kubernetes` Service points at the server.

use base64::Engine;
use keelson_testing::{Apiserver, Kubectl, TestHost};
use serde_json::{json, Value};
use std::process::Output;
use std::time::Duration;

/// The API server with the TokenRequest minimum lowered so tokens can expire within a test.
fn server() -> Apiserver {
    Apiserver::start_with(&["--testing-min-token-expiration-seconds", "1"])
}

fn kubectl(s: &Apiserver) -> Kubectl {
    s.kubectl_cmd()
}

/// `kubectl create token default` bound to the Pod `pod`.
fn pod_token(k: &Kubectl, pod: &str) -> Result<String, String> {
    let bound = ["--bound-object-kind", "Pod", "--bound-object-name", pod];
    let mut args = vec!["create", "token", "default"];
    args.extend(bound);
    k.run(&args)
}

/// `kubectl auth whoami` as the holder of `token`.
fn whoami(s: &Apiserver, token: &str) -> Output {
    s.kubectl(&["--token", token, "auth", "whoami", "-o", "json"])
}

fn user_info(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "whoami failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["status"]["userInfo"].clone()
}

fn refused(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    !out.status.success() && err.contains("Unauthorized")
}

/// The JWT's claims (its middle part).
fn claims(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("a JWT has three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn token_review(s: &Apiserver, token: &str) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}});
    let (code, text) = s.curl_admin(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        None,
        Some(&body.to_string()),
    );
    assert_eq!(code, 201, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()["status"].clone()
}

#[test]
fn created_token_authenticates_as_the_service_account_until_it_is_deleted() {
    let s = server();
    let k = kubectl(&s);
    k.ok(&["create", "namespace", "team"]);
    k.ok(&["-n", "team", "create", "serviceaccount", "robot"]);
    let token = k.ok(&["-n", "team", "create", "token", "robot"]);
    let token = token.trim();
    let c = claims(token);
    assert_eq!(c["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(c["sub"], "system:serviceaccount:team:robot");
    assert_eq!(
        c["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(c["kubernetes.io"]["namespace"], "team");
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        3600
    );

    let info = user_info(&whoami(&s, token));
    assert_eq!(info["username"], "system:serviceaccount:team:robot");
    let groups = info["groups"].as_array().unwrap();
    for g in [
        "system:serviceaccounts",
        "system:serviceaccounts:team",
        "system:authenticated",
    ] {
        assert!(groups.contains(&json!(g)), "{g} missing from {groups:?}");
    }

    let review = token_review(&s, token);
    assert_eq!(review["authenticated"], true, "{review}");
    assert_eq!(
        review["user"]["username"],
        "system:serviceaccount:team:robot"
    );
    assert_eq!(
        review["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    let forged = format!("{}x", &token[..token.len() - 1]);
    let review = token_review(&s, &forged);
    assert!(review["authenticated"].is_null(), "{review}");
    assert_eq!(review["error"], "invalid bearer token");
    assert!(refused(&whoami(&s, &forged)));

    // What the account may do is RBAC's: nothing, until a binding gives it view.
    let err = k
        .run(&["--token", token, "-n", "team", "get", "pods"])
        .unwrap_err();
    assert!(
        err.contains("User \"system:serviceaccount:team:robot\" cannot list resource \"pods\""),
        "{err}"
    );
    k.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "robot-view",
        "--clusterrole=view",
        "--serviceaccount=team:robot",
    ]);
    k.ok(&["--token", token, "-n", "team", "get", "pods"]);

    // TokenReview is found through discovery, as kubectl finds it.
    let resources = k.ok(&["api-resources", "--api-group=authentication.k8s.io"]);
    assert!(resources.contains("tokenreviews"), "{resources}");

    // An account deleted (even if made again, with another uid) takes its tokens with it.
    k.ok(&["-n", "team", "delete", "serviceaccount", "robot"]);
    k.ok(&["-n", "team", "create", "serviceaccount", "robot"]);
    assert!(refused(&whoami(&s, token)));
}

#[test]
fn expired_tokens_and_tokens_of_deleted_pods_are_refused() {
    let s = server();
    let k = kubectl(&s);
    k.ok(&["create", "serviceaccount", "default"]);
    let short = k.ok(&["create", "token", "default", "--duration", "2s"]);
    assert!(whoami(&s, short.trim()).status.success());
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        refused(&whoami(&s, short.trim())),
        "an expired token is 401"
    );

    k.ok(&["run", "p", "--image", "busybox", "--restart", "Never"]);
    let bound = pod_token(&k, "p").unwrap();
    let c = claims(bound.trim());
    assert_eq!(c["kubernetes.io"]["pod"]["name"], "p");
    assert!(whoami(&s, bound.trim()).status.success());
    let review = token_review(&s, bound.trim());
    assert_eq!(
        review["user"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"]),
        "{review}"
    );
    k.ok(&["delete", "pod", "p", "--grace-period=0", "--force"]);
    assert!(refused(&whoami(&s, bound.trim())), "the pod is gone");

    // A pod that does not exist, or a duration under the minimum, is refused at issue.
    let err = pod_token(&k, "nope").unwrap_err();
    assert!(err.contains("pods \"nope\" not found"), "{err}");
    let out = s.kubectl(&["create", "token", "nobody"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("serviceaccounts \"nobody\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pod(s: &Apiserver, name: &str, spec_extra: Value) -> Output {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}],
        "initContainers": [{"name": "init", "image": "busybox"}]});
    if let (Some(m), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        m.extend(extra.clone());
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
    s.kubectl_stdin(&["create", "-f", "-"], &pod.to_string())
}

#[test]
fn pods_get_the_projected_token_volume_unless_automount_is_off() {
    let s = server();
    let k = kubectl(&s);
    // No `default` account yet (its controller is not running): admitted anyway.
    assert!(pod(&s, "plain", json!({})).status.success());
    let p = k.json(&["get", "pod", "plain"]).unwrap();
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    let volume = &p["spec"]["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(
        name.starts_with("kube-api-access-") && name.len() == 21,
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    let mount = json!([{"name": name, "readOnly": true,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]);
    assert_eq!(p["spec"]["containers"][0]["volumeMounts"], mount);
    assert_eq!(p["spec"]["initContainers"][0]["volumeMounts"], mount);

    assert!(
        pod(&s, "off", json!({"automountServiceAccountToken": false}))
            .status
            .success()
    );
    let p = k.json(&["get", "pod", "off"]).unwrap();
    assert!(p["spec"]["volumes"].is_null(), "{}", p["spec"]);
    assert!(p["spec"]["containers"][0]["volumeMounts"].is_null());

    // An account that turns automounting off does so for its pods.
    k.apply("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: quiet, namespace: default}\nautomountServiceAccountToken: false\n");
    assert!(pod(&s, "quiet", json!({"serviceAccountName": "quiet"}))
        .status
        .success());
    let p = k.json(&["get", "pod", "quiet"]).unwrap();
    assert!(p["spec"]["volumes"].is_null(), "{}", p["spec"]);

    let out = pod(&s, "lost", json!({"serviceAccountName": "missing"}));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"lost\" is forbidden: error looking up service account default/missing: serviceaccount \"missing\" not found"
    );
}

#[test]
fn the_kubernetes_service_points_at_the_server_and_is_restored_at_start() {
    // Endpoints need an address pods can reach: the server runs in a test host, on a veth.
    let host = TestHost::create("sa-svc");
    let peer = TestHost::create("sa-peer");
    host.veth("eth0", "10.77.0.1/24", &peer, "eth0", "10.77.0.2/24");
    let mut s = Apiserver::start_in(&host, "10.77.0.1", &[]);
    let k = kubectl(&s);
    let svc = k.json(&["get", "service", "kubernetes"]).unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}])
    );
    assert!(svc["spec"]["selector"].is_null());
    let slice = k.json(&["get", "endpointslice", "kubernetes"]).unwrap();
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.77.0.1"]));
    assert_eq!(
        slice["ports"],
        json!([{"name": "https", "port": 6443, "protocol": "TCP"}])
    );
    let ep = k.json(&["get", "endpoints", "kubernetes"]).unwrap();
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "10.77.0.1");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], 6443);

    // A change by hand is undone at the next start.
    k.ok(&[
        "patch",
        "endpointslice",
        "kubernetes",
        "--type=merge",
        "-p",
        r#"{"endpoints":[{"addresses":["10.9.9.9"]}]}"#,
    ]);
    s.restart();
    let slice = kubectl(&s)
        .json(&["get", "endpointslice", "kubernetes"])
        .unwrap();
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.77.0.1"]));
}

#[test]
fn on_loopback_the_kubernetes_service_has_no_endpoints() {
    let s = server();
    let k = kubectl(&s);
    let svc = k.json(&["get", "service", "kubernetes"]).unwrap();
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    let out = s.kubectl(&["get", "endpointslice", "kubernetes"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
}

#[test]
fn a_node_gets_tokens_only_for_pods_bound_to_it() {
    let s = server();
    let k = kubectl(&s);
    k.ok(&["create", "serviceaccount", "default"]);
    for (pod, node) in [("mine", "n1"), ("theirs", "n2")] {
        let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n");
        s.apply(&yaml);
    }
    let node = Kubectl::new(s.kubeconfig_for("system:node:n1", &["system:nodes"]));
    let token = pod_token(&node, "mine").expect("a token for a pod on the node");
    assert_eq!(claims(token.trim())["kubernetes.io"]["node"]["name"], "n1");
    let err = pod_token(&node, "theirs").unwrap_err();
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "{err}"
    );
    let err = node.run(&["create", "token", "default"]).unwrap_err();
    assert!(err.contains("forbidden"), "{err}");
}
