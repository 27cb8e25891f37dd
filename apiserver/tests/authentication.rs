//! Who a request is, as a user of kubectl sees it: bootstrap tokens from kube-system Secrets
//! (limited to CSRs until RBAC), client certificates signed by the cluster CA, and anonymous
//! requests (refused outside the public paths).

mod common;

use common::{bootstrap_token, client_cert, csr_yaml, kubeconfig};
use keelson_testing::Apiserver;

const VALID: &str = "  usage-bootstrap-authentication: \"true\"\n  expiration: \"2099-01-01T00:00:00Z\"\n  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token\n";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bootstrap_token_may_create_a_csr_and_nothing_else() {
    let s = Apiserver::start();
    let dir = tempfile::tempdir().unwrap();
    bootstrap_token(&s, "abcdef", "0123456789abcdef", VALID);
    let k = kubeconfig(&s, dir.path(), "boot", "    token: abcdef.0123456789abcdef");
    let who = k.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo}"]);
    assert_eq!(
        who,
        r#"{"groups":["system:bootstrappers","system:bootstrappers:kubeadm:default-node-token","system:authenticated"],"username":"system:bootstrap:abcdef"}"#
    );
    let yaml = csr_yaml("node-csr-boot", "");
    let out = k.with_stdin(&["create", "-f", "-"], &yaml);
    assert!(out.status.success(), "{}", stderr(&out));
    // It reads CSRs (to wait for its certificate), and the server recorded who asked.
    let requestor = k.ok(&[
        "get",
        "csr",
        "node-csr-boot",
        "-o",
        "jsonpath={.spec.username}",
    ]);
    assert_eq!(requestor, "system:bootstrap:abcdef");
    let err = stderr(&k.output(&["get", "pods"]));
    assert!(
        err.contains(r#"Error from server (Forbidden): pods is forbidden: User "system:bootstrap:abcdef" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{err}"
    );
    let err = stderr(&k.output(&["certificate", "approve", "node-csr-boot"]));
    assert!(
        err.contains("Forbidden") && err.contains("certificatesigningrequests/approval"),
        "{err}"
    );
    let err = stderr(&k.output(&["get", "secrets", "-n", "kube-system"]));
    assert!(err.contains("Forbidden"), "{err}");
}

#[test]
fn expired_wrong_or_unusable_tokens_are_unauthorized() {
    let s = Apiserver::start();
    let dir = tempfile::tempdir().unwrap();
    bootstrap_token(
        &s,
        "expird",
        "0123456789abcdef",
        "  usage-bootstrap-authentication: \"true\"\n  expiration: \"2020-01-01T00:00:00Z\"\n",
    );
    bootstrap_token(
        &s,
        "nouse0",
        "0123456789abcdef",
        "  expiration: \"2099-01-01T00:00:00Z\"\n",
    );
    bootstrap_token(&s, "abcdef", "0123456789abcdef", VALID);
    for (name, token) in [
        ("expired", "expird.0123456789abcdef"),
        ("no-usage", "nouse0.0123456789abcdef"),
        ("wrong-secret", "abcdef.0123456789abcdee"),
        ("no-secret", "zzzzzz.0123456789abcdef"),
    ] {
        let k = kubeconfig(&s, dir.path(), name, &format!("    token: {token}"));
        let err = stderr(&k.output(&["get", "csr"]));
        assert!(err.contains("Unauthorized"), "{name}: {err}");
    }
    // The same Secret turned into another type no longer authenticates.
    let good = kubeconfig(&s, dir.path(), "good", "    token: abcdef.0123456789abcdef");
    good.ok(&["get", "csr"]);
    s.kubectl_ok(&[
        "delete",
        "secret",
        "-n",
        "kube-system",
        "bootstrap-token-abcdef",
    ]);
    assert!(stderr(&good.output(&["get", "csr"])).contains("Unauthorized"));
}

#[test]
fn a_client_certificate_from_the_cluster_ca_is_its_common_name() {
    let s = Apiserver::start();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = client_cert(&s, "system:node:n1", &["system:nodes"], true);
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}",
        common::b64(cert.as_bytes()),
        common::b64(key.as_bytes())
    );
    let k = kubeconfig(&s, dir.path(), "node", &user);
    let who = k.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo}"]);
    assert_eq!(
        who,
        r#"{"groups":["system:nodes","system:authenticated"],"username":"system:node:n1"}"#
    );
    let out = k.with_stdin(&["create", "-f", "-"], &csr_yaml("renewal", ""));
    assert!(out.status.success(), "{}", stderr(&out));
    let requestor = s.kubectl_ok(&[
        "get",
        "csr",
        "renewal",
        "-o",
        "jsonpath={.spec.username} {.spec.groups}",
    ]);
    assert_eq!(
        requestor,
        r#"system:node:n1 ["system:nodes","system:authenticated"]"#
    );
    // A node reads what the system:node rules allow (its pods only by selector: node_authorizer.rs).
    k.ok(&["get", "nodes"]);

    // A certificate from another CA of the same name does not get through the handshake
    // (its signature does not verify with the cluster CA's key).
    let (cert, key) = client_cert(&s, "system:node:n1", &["system:nodes"], false);
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}",
        common::b64(cert.as_bytes()),
        common::b64(key.as_bytes())
    );
    let stranger = kubeconfig(&s, dir.path(), "stranger", &user);
    let out = stranger.output(&["get", "pods"]);
    let err = stderr(&out);
    // The server ends the handshake; kubectl reports the TLS alert, or a broken pipe or reset
    // when the server closed before kubectl finished writing (with or without kubectl's
    // "Unable to connect to the server:" in front, depending on where its retry stopped):
    // either way no request got through.
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote error: tls: error decrypting message")
            || err.contains("Unable to connect to the server: write tcp")
            || err.contains("Unable to connect to the server: read tcp"),
        "{err}"
    );
}

#[test]
fn anonymous_requests_reach_only_the_public_paths() {
    let s = Apiserver::start();
    for path in ["/healthz", "/readyz", "/livez", "/version"] {
        assert_eq!(s.curl("GET", path, None, None, None).0, 200, "{path}");
    }
    for path in [
        "/api/v1/pods",
        "/api",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        "/api/v1/namespaces/kube-public/configmaps",
    ] {
        let (code, body) = s.curl("GET", path, None, None, None);
        assert_eq!(code, 401, "{path}: {body}");
    }
}

#[test]
fn the_bearer_scheme_is_read_in_any_case() {
    let s = Apiserver::start();
    let token = s.token();
    let code = |header: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "-m", "10"])
            .args(["-H", header, &s.url("/api/v1/namespaces")])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for scheme in ["Bearer", "bearer", "BEARER"] {
        assert_eq!(
            code(&format!("Authorization: {scheme} {token}")),
            "200",
            "{scheme}"
        );
    }
    assert_eq!(code(&format!("Authorization: Basic {token}")), "401");
    assert_eq!(code("Authorization: bearer wrong-token"), "401");
}
