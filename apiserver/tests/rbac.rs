//! RBAC as a user of kubectl sees it: a user bound to `view` in one namespace, `kubectl auth
//! can-i`, roles edited while in use, SubjectAccessReview, the default policy, and
//! --authorization-mode AlwaysAllow.

mod common;

use keelson_testing::{Apiserver, Kubectl};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A server whose --token-auth-file knows alice (no groups), and alice's kubectl.
fn with_alice() -> (Apiserver, Kubectl, tempfile::TempDir) {
    let (s, alice, dir) = common::server_knowing_alice();
    for ns in ["dev", "prod"] {
        s.kubectl_ok(&["create", "namespace", ns]);
        s.kubectl_ok(&["-n", ns, "run", "web", "--image=nginx"]);
        s.kubectl_ok(&[
            "-n",
            ns,
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=password=x",
        ]);
    }
    common::bind_alice(&s, "dev", "view");
    (s, alice, dir)
}

/// kubectl's answer to `auth can-i ARGS`: ("yes" | "no", whether it exited 0).
fn can_i(k: &Kubectl, args: &[&str]) -> (String, bool) {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = k.output(&all);
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (answer, out.status.success())
}

#[test]
fn a_user_bound_to_view_in_one_namespace_reads_there_and_nothing_more() {
    let (s, alice, _dir) = with_alice();
    assert_eq!(
        alice.ok(&["-n", "dev", "get", "pods", "-o", "name"]).trim(),
        "pod/web"
    );
    alice.ok(&["-n", "dev", "get", "deployments,services,configmaps,events"]);

    let err = stderr(&alice.output(&["-n", "dev", "get", "secrets"]));
    assert!(
        err.contains(r#"Error from server (Forbidden): secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "dev""#),
        "{err}"
    );
    let err = stderr(&alice.output(&["-n", "dev", "get", "secret", "db"]));
    assert!(
        err.contains(r#"secrets "db" is forbidden: User "alice" cannot get resource "secrets""#),
        "{err}"
    );
    let err = stderr(&alice.output(&["-n", "dev", "create", "configmap", "x"]));
    assert!(
        err.contains(r#"configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "dev""#),
        "{err}"
    );
    for args in [
        vec!["-n", "dev", "delete", "pod", "web"],
        vec!["-n", "dev", "label", "pod", "web", "a=b"],
        vec!["-n", "dev", "run", "other", "--image=nginx"],
    ] {
        let err = stderr(&alice.output(&args));
        assert!(err.contains("Forbidden"), "{args:?}: {err}");
    }
    let err = stderr(&alice.output(&["-n", "prod", "get", "pods"]));
    assert!(
        err.contains(r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "prod""#),
        "{err}"
    );
    let err = stderr(&alice.output(&["get", "pods", "-A"]));
    assert!(err.contains("at the cluster scope"), "{err}");
    // Nothing was written.
    assert_eq!(
        s.kubectl_ok(&["-n", "dev", "get", "pods", "-o", "name"])
            .trim(),
        "pod/web"
    );
    assert!(
        s.kubectl(&["-n", "dev", "get", "configmap", "x"])
            .status
            .code()
            == Some(1)
    );
}

#[test]
fn kubectl_auth_can_i_answers_as_upstream() {
    let (s, alice, _dir) = with_alice();
    let yes = ("yes".to_string(), true);
    let no = ("no".to_string(), false);
    assert_eq!(can_i(&alice, &["list", "pods", "-n", "dev"]), yes);
    assert_eq!(can_i(&alice, &["get", "pods/log", "-n", "dev"]), yes);
    assert_eq!(
        can_i(&alice, &["watch", "deployments.apps", "-n", "dev"]),
        yes
    );
    assert_eq!(can_i(&alice, &["get", "secrets", "-n", "dev"]), no);
    assert_eq!(can_i(&alice, &["create", "deployments", "-n", "dev"]), no);
    assert_eq!(can_i(&alice, &["list", "pods", "-n", "prod"]), no);
    assert_eq!(can_i(&alice, &["list", "nodes"]), no);
    assert_eq!(can_i(&alice, &["get", "/apis"]), yes, "system:discovery");
    assert_eq!(can_i(&alice, &["get", "/metrics"]), no);
    assert_eq!(
        can_i(
            &alice,
            &["create", "selfsubjectaccessreviews.authorization.k8s.io"]
        ),
        yes
    );
    assert_eq!(
        can_i(&s.kubectl_cmd(), &["*", "*"]),
        yes,
        "the admin is in system:masters"
    );
    assert_eq!(
        can_i(&s.kubectl_cmd(), &["delete", "nodes", "--all-namespaces"]),
        yes
    );

    // --list: the rules alice holds in dev.
    let list = alice.ok(&["auth", "can-i", "--list", "-n", "dev"]);
    let pods = list
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_default();
    assert!(pods.contains("[get list watch]"), "{list}");
    assert!(!list.lines().any(|l| l.starts_with("secrets ")), "{list}");
    let prod = alice.ok(&["auth", "can-i", "--list", "-n", "prod"]);
    assert!(!prod.lines().any(|l| l.starts_with("pods ")), "{prod}");
}

#[test]
fn an_edited_role_is_in_effect_on_the_next_request() {
    let (s, alice, _dir) = with_alice();
    s.kubectl_ok(&[
        "-n",
        "dev",
        "create",
        "configmap",
        "settings",
        "--from-literal=a=b",
    ]);
    s.kubectl_ok(&[
        "-n",
        "dev",
        "create",
        "role",
        "secret-reader",
        "--verb=get",
        "--resource=secrets",
    ]);
    s.kubectl_ok(&[
        "-n",
        "dev",
        "create",
        "rolebinding",
        "alice-secrets",
        "--role=secret-reader",
        "--user=alice",
    ]);
    // No wait between the write and the request that needs it.
    alice.ok(&["-n", "dev", "get", "secret", "db"]);
    // The role narrowed to one Secret's name, while alice's binding to it stands.
    let only_name = |name: &str| {
        let patch =
            format!(r#"[{{"op": "add", "path": "/rules/0/resourceNames", "value": ["{name}"]}}]"#);
        s.kubectl_ok(&[
            "-n",
            "dev",
            "patch",
            "role",
            "secret-reader",
            "--type=json",
            "-p",
            &patch,
        ]);
    };
    only_name("other");
    let err = stderr(&alice.output(&["-n", "dev", "get", "secret", "db"]));
    assert!(err.contains("Forbidden"), "{err}");
    only_name("db");
    alice.ok(&["-n", "dev", "get", "secret", "db"]);
    s.kubectl_ok(&["-n", "dev", "delete", "rolebinding", "alice-secrets"]);
    assert!(stderr(&alice.output(&["-n", "dev", "get", "secret", "db"])).contains("Forbidden"));
    // A binding made before its role grants from the moment the role exists.
    s.kubectl_ok(&[
        "-n",
        "dev",
        "create",
        "rolebinding",
        "alice-cm",
        "--role=cm-writer",
        "--user=alice",
    ]);
    assert!(
        stderr(&alice.output(&["-n", "dev", "delete", "configmap", "settings"]))
            .contains("Forbidden")
    );
    s.kubectl_ok(&[
        "-n",
        "dev",
        "create",
        "role",
        "cm-writer",
        "--verb=delete",
        "--resource=configmaps",
    ]);
    alice.ok(&["-n", "dev", "delete", "configmap", "settings"]);
}

#[test]
fn subject_access_reviews_answer_for_others() {
    let (s, _alice, _dir) = with_alice();
    let review = |user: &str, ns: &str, verb: &str, resource: &str| {
        let body = format!(
            "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: {user}\n  resourceAttributes: {{namespace: {ns}, verb: {verb}, resource: {resource}}}\n"
        );
        let out = s.kubectl_stdin(
            &[
                "create",
                "-f",
                "-",
                "-o",
                "jsonpath={.status.allowed} {.status.reason}",
            ],
            &body,
        );
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        review("alice", "dev", "list", "pods"),
        r#"true RBAC: allowed by RoleBinding "alice-view/dev" of ClusterRole "view" to User "alice""#
    );
    assert_eq!(review("alice", "prod", "list", "pods").trim(), "false");
    // A local review must stay in its namespace.
    let local = "apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nmetadata: {namespace: dev}\nspec:\n  user: alice\n  resourceAttributes: {namespace: prod, verb: list, resource: pods}\n";
    let err = stderr(&s.kubectl_stdin(&["create", "-f", "-"], local));
    assert!(
        err.contains("spec.resourceAttributes.namespace must match namespace: dev"),
        "{err}"
    );
    // Nobody to ask about.
    let nobody = "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  resourceAttributes: {verb: list, resource: pods}\n";
    let err = stderr(&s.kubectl_stdin(&["create", "-f", "-"], nobody));
    assert!(
        err.contains("at least one of user or group must be specified"),
        "{err}"
    );
    let names = s.kubectl_ok(&[
        "api-resources",
        "--api-group=authorization.k8s.io",
        "-o",
        "name",
    ]);
    for r in [
        "selfsubjectaccessreviews",
        "subjectaccessreviews",
        "localsubjectaccessreviews",
        "selfsubjectrulesreviews",
    ] {
        assert!(names.contains(r), "{names}");
    }
}

#[test]
fn the_default_policy_is_listed_and_restored_at_start() {
    let (mut s, alice, _dir) = with_alice();
    let roles = s.kubectl_ok(&["get", "clusterroles"]);
    let header = roles.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("NAME") && header.contains("CREATED AT"),
        "{roles}"
    );
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:node",
        "system:kube-scheduler",
        "system:controller:deployment-controller",
    ] {
        assert!(
            roles
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name}: {roles}"
        );
    }
    let bindings = s.kubectl_ok(&["-n", "dev", "get", "rolebindings", "-o", "wide"]);
    let row: Vec<&str> = bindings
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[0], row[1], row[3]),
        ("alice-view", "ClusterRole/view", "alice"),
        "{bindings}"
    );
    s.kubectl_ok(&["get", "clusterrolebindings", "cluster-admin"]);

    // Deleted or edited defaults come back at the next start; an edit marked autoupdate=false stays.
    s.kubectl_ok(&["delete", "clusterrole", "view"]);
    assert!(stderr(&alice.output(&["-n", "dev", "get", "pods"])).contains("Forbidden"));
    s.kubectl_ok(&[
        "annotate",
        "--overwrite",
        "clusterrole",
        "edit",
        "rbac.authorization.kubernetes.io/autoupdate=false",
    ]);
    s.kubectl_ok(&[
        "patch",
        "clusterrole",
        "edit",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/rules", "value": []}]"#,
    ]);
    s.restart();
    alice.ok(&["-n", "dev", "get", "pods"]);
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "clusterrole",
            "edit",
            "-o",
            "jsonpath={.rules[*].verbs}"
        ])
        .trim(),
        ""
    );
}

#[test]
fn always_allow_lets_every_authenticated_user_do_anything() {
    let (mut s, alice, dir) = with_alice();
    let tokens = dir.path().join("tokens.csv");
    s.restart_with(&[
        "--token-auth-file",
        tokens.to_str().unwrap(),
        "--authorization-mode",
        "AlwaysAllow",
    ]);
    alice.ok(&["-n", "prod", "get", "secret", "db"]);
    alice.ok(&["create", "namespace", "alices"]);
    let (code, _) = s.curl("GET", "/api/v1/pods", None, None, None);
    assert_eq!(code, 401, "anonymous users are still not let in");
}

#[test]
fn an_unknown_authorization_mode_is_refused_with_the_choices() {
    let out = std::process::Command::new(keelson_testing::binary("keelson-apiserver"))
        .args(["--authorization-mode", "Node,Magic"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("invalid value 'Magic' for '--authorization-mode")
            && err.contains("AlwaysAllow, Node, RBAC"),
        "{err}"
    );
}

#[test]
fn a_namespace_admin_grants_only_what_they_hold() {
    let (s, alice, _dir) = with_alice();
    s.kubectl_ok(&[
        "-n",
        "prod",
        "create",
        "rolebinding",
        "alice-admin",
        "--clusterrole=admin",
        "--user=alice",
    ]);
    // Within what admin holds: a binding to view, a role over Secrets.
    alice.ok(&[
        "-n",
        "prod",
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
    ]);
    alice.ok(&[
        "-n",
        "prod",
        "create",
        "role",
        "secrets",
        "--verb=get,list",
        "--resource=secrets",
    ]);
    // Beyond it: cluster-admin's "*", a role over Nodes, widening a role by a patch.
    let err = stderr(&alice.output(&[
        "-n",
        "prod",
        "create",
        "rolebinding",
        "me-root",
        "--clusterrole=cluster-admin",
        "--user=alice",
    ]));
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "me-root" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#)
            && err.contains(r#"{APIGroups:["*"], Resources:["*"], Verbs:["*"]}"#),
        "{err}"
    );
    let err = stderr(&alice.output(&[
        "-n",
        "prod",
        "create",
        "role",
        "nodes",
        "--verb=get",
        "--resource=nodes",
    ]));
    assert!(
        err.contains(r#"{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}"#),
        "{err}"
    );
    let err = stderr(&alice.output(&[
        "-n",
        "prod",
        "patch",
        "role",
        "secrets",
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/rules/0/verbs/-", "value": "escalate"}]"#,
    ]));
    assert!(
        err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    // In dev alice only views: no bindings at all.
    let err = stderr(&alice.output(&[
        "-n",
        "dev",
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
    ]));
    assert!(
        err.contains("cannot create resource \"rolebindings\""),
        "{err}"
    );
    // The admin (system:masters) binds anything.
    s.kubectl_ok(&[
        "-n",
        "prod",
        "create",
        "rolebinding",
        "root",
        "--clusterrole=cluster-admin",
        "--user=carol",
    ]);
}
