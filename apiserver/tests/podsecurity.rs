//! PodSecurity admission through kubectl: a namespace's pod-security.kubernetes.io labels
//! refuse the pods that violate its enforce level with upstream's message, and warn about
//! workloads whose templates would.

use keelson_testing::Apiserver;

fn namespace(name: &str, labels: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n")
}

fn pod(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}"
    )
}

const PRIVILEGED: &str =
    "  containers:\n  - name: c\n    image: busybox\n    securityContext: {privileged: true}\n";

const RESTRICTED: &str = "  securityContext:\n    runAsNonRoot: true\n    seccompProfile: {type: RuntimeDefault}\n  containers:\n  - name: c\n    image: busybox\n    securityContext:\n      allowPrivilegeEscalation: false\n      capabilities: {drop: [ALL]}\n";

/// `kubectl apply` of `yaml`: (success, stderr).
fn apply(s: &Apiserver, yaml: &str) -> (bool, String) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], yaml);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stderr)
}

#[test]
fn a_restricted_namespace_refuses_a_privileged_pod_with_upstreams_message() {
    let s = Apiserver::start();
    s.apply(&namespace(
        "locked",
        "pod-security.kubernetes.io/enforce: restricted",
    ));
    let (ok, err) = apply(&s, &pod("locked", "x", PRIVILEGED));
    assert!(!ok, "a privileged pod was admitted");
    let want = "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": \
        privileged (container \"c\" must not set securityContext.privileged=true), \
        allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
        unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
        runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
        seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";
    assert!(err.contains(want), "got: {err}");
    assert!(err.contains("Error from server (Forbidden)"), "{err}");
    let (ok, err) = apply(&s, &pod("locked", "fine", RESTRICTED));
    assert!(ok, "a compliant pod was refused: {err}");
    assert!(
        !err.contains("Warning"),
        "a compliant pod got warnings: {err}"
    );
    let phase = s.kubectl_ok(&["get", "pod", "fine", "-n", "locked", "-o", "name"]);
    assert_eq!(phase.trim(), "pod/fine");
    // Without labels nothing is checked.
    let (ok, err) = apply(&s, &pod("default", "x", PRIVILEGED));
    assert!(ok && !err.contains("Warning"), "{err}");
}

#[test]
fn baseline_refuses_host_network_and_pinned_versions_show() {
    let s = Apiserver::start();
    let labels = "pod-security.kubernetes.io/enforce: baseline, pod-security.kubernetes.io/enforce-version: v1.30";
    s.apply(&namespace("base", labels));
    let host = "  hostNetwork: true\n  containers:\n  - name: c\n    image: busybox\n";
    let (ok, err) = apply(&s, &pod("base", "h", host));
    assert!(!ok, "hostNetwork was admitted in baseline");
    assert!(
        err.contains("pods \"h\" is forbidden: violates PodSecurity \"baseline:v1.30\": host namespaces (hostNetwork=true)"),
        "got: {err}"
    );
    // Baseline lets a pod run as root with every default capability.
    let plain = "  containers:\n  - name: c\n    image: busybox\n    securityContext: {capabilities: {add: [CHOWN]}}\n";
    let (ok, err) = apply(&s, &pod("base", "plain", plain));
    assert!(ok, "{err}");
}

#[test]
fn workloads_and_warn_labels_give_warnings_not_refusals() {
    let s = Apiserver::start();
    s.apply(&namespace(
        "locked",
        "pod-security.kubernetes.io/enforce: restricted",
    ));
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: locked\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      hostNetwork: true\n      containers: [{name: c, image: busybox}]\n";
    let (ok, err) = apply(&s, deployment);
    assert!(ok, "a Deployment is never refused: {err}");
    assert!(
        err.contains("Warning: would violate PodSecurity \"restricted:latest\": host namespaces (hostNetwork=true), allowPrivilegeEscalation != false"),
        "got: {err}"
    );
    // A change that leaves the template alone brings no warning.
    let out = s.kubectl(&["scale", "deployment", "web", "-n", "locked", "--replicas=2"]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Warning"));
    // warn alone: admitted, with a warning.
    s.apply(&namespace(
        "watched",
        "pod-security.kubernetes.io/warn: baseline",
    ));
    let (ok, err) = apply(&s, &pod("watched", "p", PRIVILEGED));
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"),
        "got: {err}"
    );
}

#[test]
fn a_stricter_enforce_label_names_the_pods_already_there_and_bad_labels_are_refused() {
    let s = Apiserver::start();
    s.apply(&namespace("team", ""));
    let host = "  hostNetwork: true\n  containers:\n  - name: c\n    image: busybox\n";
    for name in ["b", "a", "c"] {
        s.apply(&pod("team", name, host));
    }
    s.apply(&pod("team", "p", PRIVILEGED));
    s.apply(&pod("team", "fine", RESTRICTED));
    let out = s.kubectl(&[
        "label",
        "ns",
        "team",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            "Warning: existing pods in namespace \"team\" violate the new PodSecurity enforce level \"baseline:latest\"",
            "Warning: a (and 2 other pods): host namespaces",
            "Warning: p: privileged",
        ]
    );
    // The pods stay; new ones are refused.
    assert_eq!(
        s.kubectl_ok(&["get", "pods", "-n", "team", "-o", "name"])
            .lines()
            .count(),
        5
    );
    // An existing pod may still be labelled, but not given another image (upstream checks
    // updates that could change what runs).
    s.kubectl_ok(&["label", "pod", "p", "-n", "team", "x=y"]);
    let err = s
        .kubectl_cmd()
        .run(&["set", "image", "pod/p", "-n", "team", "c=busybox:2"])
        .unwrap_err();
    assert!(
        err.contains("pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"),
        "{err}"
    );
    // The same level again checks nothing.
    let out = s.kubectl(&[
        "label",
        "ns",
        "team",
        "--overwrite",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).is_empty());

    let out = s.kubectl(&[
        "label",
        "ns",
        "team",
        "--overwrite",
        "pod-security.kubernetes.io/enforce=strict",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{stderr}"
    );
}
