//! Draining a node: kubectl drain evicts its pods through pods/eviction, and waits rather than
//! break a PodDisruptionBudget; and every new pod tolerates a node's outage for the default
//! seconds (admission DefaultTolerationSeconds).

use keelson_testing::Apiserver;

fn pod(name: &str, node: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n{extra_spec}"
    )
}

#[test]
fn kubectl_drain_evicts_the_nodes_pods() {
    let s = Apiserver::start();
    s.apply("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n2\n");
    for (name, node) in [("a", "n1"), ("b", "n1"), ("c", "n2")] {
        s.apply(&pod(name, node, ""));
    }
    let out = s.kubectl_ok(&[
        "drain",
        "n1",
        "--ignore-daemonsets",
        "--force",
        "--grace-period=0",
        "--timeout=30s",
    ]);
    for line in [
        "node/n1 cordoned",
        "pod/a evicted",
        "pod/b evicted",
        "node/n1 drained",
    ] {
        assert!(out.contains(line), "{line} missing in:\n{out}");
    }
    let left = s.kubectl_ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(left, "c", "only the other node's pod is left");
    let unschedulable =
        s.kubectl_ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]);
    assert_eq!(unschedulable, "true");
}

/// The disruption controller is not running here: the test writes the budget's status as it
/// would, so the eviction side is checked on its own (controllers/tests/disruption.rs runs both).
#[test]
fn drain_waits_rather_than_break_a_disruption_budget() {
    let s = Apiserver::start();
    s.apply("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n");
    for name in ["a", "b"] {
        s.apply(&pod(name, "n1", "").replace("  name: ", "  labels: {app: web}\n  name: "));
        s.kubectl_cmd().mark_pod_ready(name, None).unwrap();
    }
    s.apply("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: web}}\n");
    let status = |allowed: i32| {
        format!(
            r#"{{"status":{{"observedGeneration":1,"disruptionsAllowed":{allowed},"currentHealthy":2,"desiredHealthy":{},"expectedPods":2}}}}"#,
            2 - allowed
        )
    };
    // What the disruption controller would write.
    let set_allowed = |allowed: i32| {
        s.kubectl_cmd()
            .patch_status("pdb", "web", &status(allowed))
            .unwrap()
    };
    let drain = |timeout: &str| {
        s.kubectl(&[
            "drain",
            "n1",
            "--force",
            "--grace-period=0",
            &format!("--timeout={timeout}"),
        ])
    };
    set_allowed(0);
    let row = s.kubectl_ok(&["get", "pdb", "web", "--no-headers"]);
    assert!(
        row.starts_with("web ") && row.contains(" 2 ") && row.contains("N/A"),
        "{row}"
    );
    let out = drain("7s");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drain must not finish");
    assert!(
        err.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{err}"
    );
    let left = s.kubectl_ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(left, "a b", "no pod was evicted");
    // One disruption allowed: one pod goes, the grant is recorded, the second waits again.
    set_allowed(1);
    let out = drain("7s");
    assert!(!out.status.success(), "the second pod must wait");
    let left = s.kubectl_ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(left.split(' ').count(), 1, "one pod evicted: {left}");
    let allowed = s.jsonpath_ok(&["pdb", "web"], "{.status.disruptionsAllowed}");
    assert_eq!(allowed, "0");
    let disrupted = s.jsonpath_ok(&["pdb", "web"], "{.status.disruptedPods}");
    assert!(
        disrupted.contains("\"a\"") || disrupted.contains("\"b\""),
        "{disrupted}"
    );
    // Two budgets over one pod: upstream refuses to choose.
    s.apply("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: also\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: web}}\n");
    let out = drain("3s");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than one PodDisruptionBudget"), "{err}");
    // Refused specs name the field, as upstream.
    let bad = s.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: bad\nspec:\n  minAvailable: 150%\n  maxUnavailable: 1\n",
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("minAvailable and maxUnavailable cannot be both set"),
        "{err}"
    );
    assert!(
        err.contains("spec.minAvailable: Invalid value: \"150%\": must not be greater than 100%"),
        "{err}"
    );
}

#[test]
fn an_eviction_honours_its_delete_options_and_needs_the_pod() {
    let s = Apiserver::start();
    s.apply(&pod("web", "n1", "  terminationGracePeriodSeconds: 30\n"));
    let path = "/api/v1/namespaces/default/pods/web/eviction";
    let body = r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web","namespace":"default"},"deleteOptions":{"gracePeriodSeconds":7}}"#;
    let (code, resp) = s.curl_admin("POST", path, None, Some(body));
    assert_eq!(code, 201, "{resp}");
    // A pod on a node is deleted gracefully: its agent gets the eviction's grace period.
    let grace = s.jsonpath_ok(&["pod", "web"], "{.metadata.deletionGracePeriodSeconds}");
    assert_eq!(grace, "7");
    let missing = r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"gone"}}"#;
    let (code, resp) = s.curl_admin(
        "POST",
        "/api/v1/namespaces/default/pods/gone/eviction",
        None,
        Some(missing),
    );
    assert_eq!(code, 404, "{resp}");
    assert!(resp.contains(r#"pods \"gone\" not found"#), "{resp}");
    let other = r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"other"}}"#;
    let (code, resp) = s.curl_admin("POST", path, None, Some(other));
    assert_eq!(code, 400, "{resp}");
}

#[test]
fn new_pods_tolerate_an_unreachable_or_not_ready_node_for_the_default_seconds() {
    let s = Apiserver::start_with(&["--default-unreachable-toleration-seconds", "60"]);
    s.apply(&pod("plain", "", ""));
    let own = "  tolerations:\n  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}\n";
    s.apply(&pod("own", "", own));
    let shown = |name: &str| {
        s.kubectl_ok(&[
            "get",
            "pod",
            name,
            "-o",
            "jsonpath={range .spec.tolerations[*]}{.key}:{.effect}:{.tolerationSeconds} {end}",
        ])
    };
    assert_eq!(
        shown("plain").trim(),
        "node.kubernetes.io/not-ready:NoExecute:300 node.kubernetes.io/unreachable:NoExecute:60"
    );
    assert_eq!(
        shown("own").trim(),
        "node.kubernetes.io/not-ready:NoExecute:5 node.kubernetes.io/unreachable:NoExecute:60"
    );
}
